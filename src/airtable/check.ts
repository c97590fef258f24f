import type pg from 'pg';
import { Secret } from '../control/secrets.ts';
import type { CreateSyncInput } from '../control/sync-service.ts';
import { TributaryError } from '../errors.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { UpstreamUnreachable } from '../upstream/http.ts';
import { AIRTABLE_USER_SYNC_SHARE, AirtableClient, AirtableError } from './client.ts';
import { TokenOwners } from './owners.ts';

/** Scopes the sync cannot work without; webhook:manage only adds change capture. */
const REQUIRED_SCOPES = ['data.records:read', 'schema.bases:read'];

/**
 * Before a sync is created: the key must be accepted, carry the read scopes, and see
 * the base. Each failure is a 422 that says which.
 */
export function airtableCheck(options: { baseUrl: string; limiter?: QuotaLimiter; control?: pg.Pool }) {
  return async (input: CreateSyncInput): Promise<{ upstreamName?: string }> => {
    const client = new AirtableClient({
      baseUrl: options.baseUrl,
      token: new Secret(input.apiKey),
      baseId: input.baseId!,
      limiter: options.limiter,
      // The new sync's requests: within the syncs' share of the user's quota, ahead of sweeps.
      quota: { kind: 'sync', urgent: true, maxWaitMs: 10_000 },
      userSyncLimit: AIRTABLE_USER_SYNC_SHARE,
      attempts: 2,
      timeoutMs: 15_000,
      // The whoami below names the key's user: recorded, so the sync's requests count under it from its first.
      owners: new TokenOwners({ pool: options.control }),
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
