import type { QuotaRule } from '../../quota/limiter.ts';
import { AIRTABLE_RULE } from '../client.ts';

/** The base's rule, on the same time scale as the sync's (tests speed both up together). */
export const airtableRule = (timeScale = 1): QuotaRule =>
  timeScale === 1 ? AIRTABLE_RULE : { ...AIRTABLE_RULE, windowMs: AIRTABLE_RULE.windowMs / timeScale };
