import type { KindContext } from '../kinds/kind.ts';
import type { SyncRecord } from '../control/syncs.ts';
import type { Secret } from '../control/secrets.ts';
import { AirtableClient } from './client.ts';
import { TokenOwners } from './owners.ts';

/**
 * A client for a sync's base outside its runner (a deleted sync's cleanup, an attachment link):
 * with a client's priority in the base's quota, bounded waits and few attempts, since someone
 * is waiting for the answer.
 */
export function clientForSync(context: KindContext & { sync: SyncRecord; key: Secret }): AirtableClient {
  return new AirtableClient({
    baseUrl: context.baseUrl,
    token: context.key,
    baseId: context.sync.baseId!,
    limiter: context.limiter,
    quota: { kind: 'client', maxWaitMs: 10_000 },
    attempts: 2,
    timeoutMs: 15_000,
    owners: context.control ? new TokenOwners({ pool: context.control }) : undefined,
  });
}
