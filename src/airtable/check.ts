import { Secret } from '../control/secrets.ts';
import type { CreateSyncInput } from '../control/sync-service.ts';
import { TributaryError } from '../errors.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { UpstreamUnreachable } from '../upstream/http.ts';
import { AirtableClient, AirtableError } from './client.ts';

/** Scopes the sync cannot work without; webhook:manage only adds change capture. */
const REQUIRED_SCOPES = ['data.records:read', 'schema.bases:read'];

/**
 * Before a sync is created: the key must be accepted, carry the read scopes, and see
 * the base. Each failure is a 422 that says which.
 */
export function airtableCheck(options: { baseUrl: string; limiter?: QuotaLimiter }) {
  return async (input: CreateSyncInput): Promise<{ upstreamName?: string }> => {
    const client = new AirtableClient({
      baseUrl: options.baseUrl,
      token: new Secret(input.apiKey),
      baseId: input.baseId!,
      limiter: options.limiter,
      quota: { kind: 'client', maxWaitMs: 10_000 },
      attempts: 2,
      timeoutMs: 15_000,
    });
    try {
      const me = await client.whoami();
      const missing = REQUIRED_SCOPES.filter((scope) => me.scopes && !me.scopes.includes(scope));
      if (missing.length > 0) {
        throw new TributaryError('unprocessable', `the Airtable key lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
      }
      await client.schema();
      const bases = await client.bases().catch(() => []);
      return { upstreamName: bases.find((b) => b.id === input.baseId)?.name };
    } catch (error) {
      if (error instanceof TributaryError) throw error;
      if (error instanceof AirtableError && error.status === 401) {
        throw new TributaryError('unprocessable', 'the Airtable key was rejected: check the personal access token');
      }
      if (error instanceof AirtableError && (error.status === 403 || error.status === 404)) {
        throw new TributaryError('unprocessable', `the Airtable key cannot read base ${input.baseId} (or the base does not exist)`);
      }
      if (error instanceof UpstreamUnreachable || (error instanceof AirtableError && error.kind === 'transient')) {
        throw new TributaryError('unavailable', `Airtable could not be reached to check the key: ${error.message}`, { expose: true });
      }
      throw new TributaryError('unprocessable', `Airtable refused the check: ${(error as Error).message}`);
    }
  };
}
