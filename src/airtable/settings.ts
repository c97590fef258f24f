import { z } from 'zod';

/** An Airtable sync's settings (the management API's `settings`). */
export const airtableSettingsSchema = z
  .object({
    turbo: z.boolean(),
    debounce_ms: z.number().int().min(0).max(86_400_000),
    lookup_as: z.enum(['text[]', 'text']),
    intelligent_cast: z.boolean(),
  })
  .strict();

export type AirtableSettings = z.infer<typeof airtableSettingsSchema>;

export const AIRTABLE_DEFAULT_SETTINGS: AirtableSettings = { turbo: false, debounce_ms: 0, lookup_as: 'text[]', intelligent_cast: true };
