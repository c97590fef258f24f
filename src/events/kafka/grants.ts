import type pg from 'pg';
import type { AccountStore } from '../../control/accounts.ts';
import type { AccountGrants } from './access.ts';

/**
 * What the broker should grant, as the control database has it (for KafkaAccess.reconcile
 * at startup): every account with its event credentials and its syncs, except syncs being
 * deleted. Passwords are unsealed here and stay wrapped in Secret.
 */
export async function accountGrants(options: { pool: pg.Pool; accounts: AccountStore }): Promise<AccountGrants[]> {
  const { rows } = await options.pool.query<{ account_id: string; sync_id: string }>(
    `SELECT account_id, id AS sync_id FROM syncs WHERE state <> 'deleting' ORDER BY account_id, id`,
  );
  const syncsOf = new Map<string, string[]>();
  for (const row of rows) syncsOf.set(row.account_id, [...(syncsOf.get(row.account_id) ?? []), row.sync_id]);
  const grants: AccountGrants[] = [];
  for (const account of await options.accounts.list()) {
    const password = await options.accounts.eventsPassword(account.id);
    if (!password) continue; // deleted between the two reads
    grants.push({ username: account.eventsUsername, password, syncIds: syncsOf.get(account.id) ?? [] });
  }
  return grants;
}
