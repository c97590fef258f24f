import type pg from 'pg';
import { TributaryError } from '../errors.ts';
import type { NewSync } from './syncs.ts';

/** The reader role's CONNECTION LIMIT a new sync gets, within its account's budget. */
export const DEFAULT_READER_CONNECTIONS = 5;

/**
 * An account's limits and what its syncs hold of them (syncs being deleted no longer count;
 * nor does `exceptSyncId`, the one being changed), read under a transaction-scoped lock on the
 * account's syncs: decisions against them cannot interleave. Undefined for an unknown account.
 */
export async function lockedAccountLimits(tx: pg.PoolClient, accountId: string, exceptSyncId: string | null = null) {
  await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('syncs of ' || $1, 0))", [accountId]);
  return accountLimits(tx, accountId, exceptSyncId);
}

export async function accountLimits(db: pg.Pool | pg.PoolClient, accountId: string, exceptSyncId: string | null = null) {
  const { rows } = await db.query<{ max_syncs: number; budget: number; syncs: number; used: number }>(
    `SELECT a.max_syncs, a.reader_connection_budget AS budget,
            (SELECT count(*)::int FROM syncs s WHERE s.account_id = a.id AND s.state <> 'deleting') AS syncs,
            (SELECT coalesce(sum(s.reader_connection_limit), 0)::int FROM syncs s
              WHERE s.account_id = a.id AND s.state <> 'deleting' AND s.id IS DISTINCT FROM $2) AS used
       FROM accounts a WHERE a.id = $1`,
    [accountId, exceptSyncId],
  );
  return rows[0];
}

export type Admission = Pick<NewSync, 'accountId' | 'kind' | 'baseId' | 'upstreamAccountId' | 'apiKeySha256' | 'shared'> & {
  /** What an existing sync's upstream is called in a 409 ("base app…", "Stripe account acct_…"): its kind says. */
  describeUpstream(existing: { baseId: string | null; upstreamAccountId: string | null }): string;
};

/**
 * Refuses a new sync past its account's limits (see SyncStore.insert); otherwise answers the
 * CONNECTION LIMIT its reader gets.
 */
export async function admit(db: pg.Pool | pg.PoolClient, limit: Awaited<ReturnType<typeof accountLimits>>, sync: Admission): Promise<number> {
  if (!limit) throw new TributaryError('unprocessable', `account ${sync.accountId} does not exist`);
  const { rows: same } = await db.query<{ id: string; base_id: string | null; upstream_account_id: string | null }>(
    `SELECT id, base_id, upstream_account_id FROM syncs WHERE account_id = $1 AND kind = $2 AND state <> 'deleting'
        AND (base_id = $3 OR upstream_account_id = $4 OR api_key_sha256 = $5) LIMIT 1`,
    [sync.accountId, sync.kind, sync.baseId, sync.upstreamAccountId, sync.apiKeySha256 ?? null],
  );
  if (same[0]) {
    const what = sync.describeUpstream({ baseId: same[0].base_id, upstreamAccountId: same[0].upstream_account_id });
    throw new TributaryError('conflict', `this account already syncs ${what}: sync ${same[0].id}`);
  }
  if (limit.syncs >= limit.max_syncs) {
    throw new TributaryError('conflict', `this account has reached its limit of ${limit.max_syncs} syncs (the operator can raise it)`);
  }
  // A sync in another's database reads through that sync's reader: no connections of its own.
  if (sync.shared) return 0;
  const readerLimit = Math.min(DEFAULT_READER_CONNECTIONS, limit.budget - limit.used);
  if (readerLimit < 1) {
    throw new TributaryError('conflict', `this account's readers already hold its whole connection budget of ${limit.budget} (the operator can raise it)`);
  }
  return readerLimit;
}
