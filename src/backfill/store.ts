import type pg from 'pg';
import { inTransaction } from '../db/sql.ts';
import { TributaryError } from '../errors.ts';
import { newBackfillId } from '../ids.ts';
import { wakeDeliverer } from '../events/webhooks/destinations.ts';
import { type BackfillLimits, DEFAULT_BACKFILL_LIMITS } from './limits.ts';

export type BackfillState = 'running' | 'done' | 'canceled' | 'failed';
/** Asked for through the API, or the re-read of every collection after a lost slot (src/decoder/slot-recovery.ts). */
export type BackfillReason = 'requested' | 'slot_lost';
export const BACKFILL_STATES: readonly BackfillState[] = ['running', 'done', 'canceled', 'failed'];

/** One backfill on demand (sql/25_backfills.sql). */
export interface Backfill {
  id: string;
  syncId: string;
  accountId: string;
  collections: string[];
  destinationId: string | null;
  state: BackfillState;
  reason: BackfillReason;
  rows: number;
  /** The collection being read (an index into collections), and the last record id read of it. */
  position: number;
  lastKey: string | null;
  error: string | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

interface BackfillRow {
  id: string;
  sync_id: string;
  account_id: string;
  collections: string[];
  destination_id: string | null;
  state: BackfillState;
  reason: BackfillReason;
  rows: string;
  position: number;
  last_key: string | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

const COLUMNS = 'id, sync_id, account_id, collections, destination_id, state, reason, rows, position, last_key, error, created_at, updated_at, finished_at';

const toBackfill = (row: BackfillRow): Backfill => ({
  id: row.id,
  syncId: row.sync_id,
  accountId: row.account_id,
  collections: row.collections,
  destinationId: row.destination_id,
  state: row.state,
  reason: row.reason,
  rows: Number(row.rows),
  position: row.position,
  lastKey: row.last_key,
  error: row.error,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  finishedAt: row.finished_at,
});

/** Backfills not yet finished, per sync: past it a create is refused (they run one at a time). */
export const MAX_RUNNING_PER_SYNC = 10;
/** Finished backfills kept per sync (the newest); older ones go when a new one is made. */
export const MAX_KEPT_PER_SYNC = 100;
/** Finished backfills older than this go when a new one is made. */
const KEPT_MS = 7 * 86_400_000;

/** Advisory-lock classes of backfill creation ('bf', 'bA'), keyed by sync and by account. */
const LOCK_CLASS = 0x6266;
const ACCOUNT_LOCK_CLASS = 0x6241;

/** Backfills in the control database: what the API makes and shows, and what the runner works. */
export class BackfillStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly limits: BackfillLimits = DEFAULT_BACKFILL_LIMITS,
  ) {}

  /**
   * A new running backfill; 409 when the sync has MAX_RUNNING_PER_SYNC unfinished ones, 429 when
   * the account is past its backfills an hour or rows a day. Wakes the runner.
   */
  async create(input: { syncId: string; accountId: string; collections: string[]; destinationId: string | null }): Promise<Backfill> {
    return this.insert(input, 'requested', newBackfillId());
  }

  /**
   * The re-read after a lost slot, under the id the gap marker named: past every limit (the
   * stream must be made whole). Made once: SlotRecovery.markPending looks for it first.
   */
  async createForGap(input: { id: string; syncId: string; accountId: string; collections: string[] }): Promise<void> {
    await this.insert({ ...input, destinationId: null }, 'slot_lost', input.id);
  }

  async exists(id: string): Promise<boolean> {
    return (await this.pool.query('SELECT 1 FROM backfills WHERE id = $1', [id])).rows.length > 0;
  }

  private async insert(
    input: { syncId: string; accountId: string; collections: string[]; destinationId: string | null },
    reason: BackfillReason,
    id: string,
  ): Promise<Backfill> {
    const bounded = reason === 'requested';
    const made = await inTransaction(this.pool, async (client) => {
      // The account's first, then the sync's: one create of an account at a time cannot pass the counts together.
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ACCOUNT_LOCK_CLASS, input.accountId]);
      if (bounded) await this.withinAccountLimits(client, input.accountId);
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, input.syncId]);
      const { rows: counts } = await client.query<{ running: number }>(
        `SELECT count(*)::int AS running FROM backfills WHERE sync_id = $1 AND state = 'running'`,
        [input.syncId],
      );
      if (bounded && counts[0]!.running >= MAX_RUNNING_PER_SYNC) {
        throw new TributaryError(
          'conflict',
          `a sync can have at most ${MAX_RUNNING_PER_SYNC} backfills running or waiting; cancel one or wait for one to finish`,
        );
      }
      // Bounded history: finished ones past a week, and past the newest MAX_KEPT_PER_SYNC.
      await client.query(
        `DELETE FROM backfills WHERE sync_id = $1 AND state <> 'running'
            AND (finished_at < now() - make_interval(secs => $2)
                 OR id IN (SELECT id FROM backfills WHERE sync_id = $1 AND state <> 'running' ORDER BY created_at DESC OFFSET $3))`,
        [input.syncId, KEPT_MS / 1000, MAX_KEPT_PER_SYNC - 1],
      );
      const { rows } = await client.query<BackfillRow>(
        `INSERT INTO backfills (id, sync_id, account_id, collections, destination_id, state, reason)
         VALUES ($1, $2, $3, $4, $5, 'running', $6) RETURNING ${COLUMNS}`,
        [id, input.syncId, input.accountId, input.collections, input.destinationId, reason],
      );
      return toBackfill(rows[0]!);
    });
    await wakeDeliverer(this.pool, input.syncId);
    return made;
  }

  /** A 429 when the account may ask for no backfill now (checked again, under a lock, by create). */
  async withinAccountLimits(db: pg.Pool | pg.PoolClient, accountId: string): Promise<void> {
    const used = await this.usage(db, accountId);
    const { perHour, rowsPerDay } = this.limits;
    if (used.lastHour >= perHour) {
      const retryAfterSeconds = Math.max(1, used.hourFreesIn ?? 1);
      throw new TributaryError(
        'too_many_requests',
        `this account has asked for ${perHour} backfills in the last hour, its bound (TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT); retry in ${retryAfterSeconds} s`,
        { retryAfterSeconds },
      );
    }
    if (used.rowsDay >= rowsPerDay) {
      const retryAfterSeconds = Math.max(1, used.dayFreesIn ?? 1);
      throw new TributaryError(
        'too_many_requests',
        `this account's backfills have read ${used.rowsDay} rows in the last day, its bound is ${rowsPerDay} (TRIBUTARY_BACKFILL_ROWS_PER_DAY_PER_ACCOUNT); retry in ${retryAfterSeconds} s`,
        { retryAfterSeconds },
      );
    }
  }

  /** Rows the account's backfills may still read today (0 or less: none). */
  async rowsLeftToday(accountId: string): Promise<number> {
    return this.limits.rowsPerDay - (await this.usage(this.pool, accountId)).rowsDay;
  }

  /** The account's backfills of the last hour and rows of the last day, and when the oldest of each leaves its window (s). */
  private async usage(db: pg.Pool | pg.PoolClient, accountId: string) {
    const { rows } = await db.query<{ last_hour: number; hour_frees_in: number | null; rows_day: string; day_frees_in: number | null }>(
      `SELECT count(*) FILTER (WHERE created_at > now() - interval '1 hour')::int AS last_hour,
              ceil(extract(epoch FROM min(created_at) FILTER (WHERE created_at > now() - interval '1 hour') + interval '1 hour' - now()))::int AS hour_frees_in,
              COALESCE(sum(rows) FILTER (WHERE created_at > now() - interval '1 day'), 0)::text AS rows_day,
              ceil(extract(epoch FROM min(created_at) FILTER (WHERE created_at > now() - interval '1 day') + interval '1 day' - now()))::int AS day_frees_in
         FROM backfills WHERE account_id = $1 AND reason = 'requested'`,
      [accountId],
    );
    const row = rows[0]!;
    return { lastHour: row.last_hour, hourFreesIn: row.hour_frees_in, rowsDay: Number(row.rows_day), dayFreesIn: row.day_frees_in };
  }

  async list(syncId: string, limit = MAX_KEPT_PER_SYNC + MAX_RUNNING_PER_SYNC): Promise<Backfill[]> {
    const { rows } = await this.pool.query<BackfillRow>(`SELECT ${COLUMNS} FROM backfills WHERE sync_id = $1 ORDER BY created_at DESC, id LIMIT $2`, [
      syncId,
      limit,
    ]);
    return rows.map(toBackfill);
  }

  async get(syncId: string, id: string): Promise<Backfill | undefined> {
    const { rows } = await this.pool.query<BackfillRow>(`SELECT ${COLUMNS} FROM backfills WHERE sync_id = $1 AND id = $2`, [syncId, id]);
    return rows[0] && toBackfill(rows[0]);
  }

  /** Cancels a running backfill (its runner stops before its next chunk); a finished one stays as it is. */
  async cancel(syncId: string, id: string): Promise<Backfill | undefined> {
    await this.pool.query(
      `UPDATE backfills SET state = 'canceled', finished_at = now(), updated_at = now() WHERE sync_id = $1 AND id = $2 AND state = 'running'`,
      [syncId, id],
    );
    return this.get(syncId, id);
  }

  // ── for the runner ───────────────────────────────────────────────────────

  /** The oldest unfinished backfill of the sync. */
  async next(syncId: string): Promise<Backfill | undefined> {
    const { rows } = await this.pool.query<BackfillRow>(
      `SELECT ${COLUMNS} FROM backfills WHERE sync_id = $1 AND state = 'running' ORDER BY created_at, id LIMIT 1`,
      [syncId],
    );
    return rows[0] && toBackfill(rows[0]);
  }

  /**
   * Records a chunk read (or the move to the next collection: `rows` 0). False when the
   * backfill is no longer running (canceled, or gone with its sync or webhook): stop.
   */
  async advance(id: string, rows: number, position: number, lastKey: string | null): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE backfills SET rows = rows + $2, position = $3, last_key = $4, updated_at = now() WHERE id = $1 AND state = 'running'`,
      [id, rows, position, lastKey],
    );
    return (rowCount ?? 0) > 0;
  }

  async finish(id: string, state: 'done' | 'failed', error?: string): Promise<void> {
    await this.pool.query(`UPDATE backfills SET state = $2, error = $3, finished_at = now(), updated_at = now() WHERE id = $1 AND state = 'running'`, [
      id,
      state,
      error ?? null,
    ]);
  }
}
