import type pg from 'pg';
import type { AccountStore } from '../../control/accounts.ts';
import type { Secret } from '../../control/secrets.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { KafkaAccess } from './access.ts';
import { deleteRelayCursor } from './cursor.ts';

/** What the management API tells the event side when accounts and syncs come and go. */
export interface EventAccessHooks {
  accountCreated(username: string, password: Secret): Promise<void>;
  syncCreated(accountId: string, syncId: string): Promise<void>;
  syncDeleted(accountId: string, syncId: string): Promise<void>;
}

/**
 * Keeps the broker's SCRAM users and ACLs in step with accounts and syncs. A failure is
 * logged, not raised: the account or sync exists either way, and the reconcile at the next
 * start repairs the broker.
 */
export function kafkaAccessHooks(options: { access: KafkaAccess; accounts: AccountStore; pool: pg.Pool; logger: Logger }): EventAccessHooks {
  const { access, accounts, logger } = options;
  const quietly = async (what: string, work: () => Promise<unknown>) => {
    try {
      await work();
    } catch (error) {
      logger.warn({ err: toError(error) }, `Kafka access: ${what} failed; the next start repairs it`);
    }
  };
  const username = async (accountId: string) => (await accounts.get(accountId))?.eventsUsername;
  return {
    accountCreated: (name, password) => quietly('creating the SCRAM user', () => access.ensureAccount({ username: name, password })),
    syncCreated: (accountId, syncId) =>
      quietly('granting the sync topics', async () => {
        const name = await username(accountId);
        if (name) await access.grantSync(name, syncId);
      }),
    syncDeleted: (accountId, syncId) =>
      quietly('revoking the sync topics', async () => {
        const name = await username(accountId);
        if (name) await access.revokeSync(name, syncId);
        await deleteRelayCursor(options.pool, syncId);
      }),
  };
}
