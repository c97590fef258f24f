import type pg from 'pg';
import { withClient } from '../db/sql.ts';
import type { IdlePools } from '../db/idle-pools.ts';
import { lsnToBigInt } from './pgoutput.ts';

/**
 * An unchanged lag is written again after this long, so `lag_at` says the decoder still
 * reports: well within the 90 s after which the status takes a report for a decoder that
 * stopped (control/status.ts).
 */
const UNCHANGED_REWRITE_MS = 60_000;
/**
 * Figures that moved less than this count as unchanged. Without it, on a server that also
 * holds the control database, each report's own write moved the WAL, and with it the next
 * lag and the position the idle decoder confirms.
 */
const STEP_BYTES = 1024 * 1024;
/** How far back the WAL samples behind loggedThrough reach at most. */
const SAMPLES_KEPT_MS = 60 * 60_000;

/** The slot's hold on the server's WAL, as pg_replication_slots says (docs/operations.md#wal-retention). */
interface Retention {
  /** WAL the slot keeps: from its restart_lsn to the server's position. */
  retained: string | null;
  /** What may still be written before WAL the slot needs is dropped; null without a bound. */
  safe: string | null;
  /** reserved, extended, unreserved or lost. */
  status: string | null;
}

/**
 * Writes to decoder_progress how far the sync database's WAL is ahead of what its slot was
 * told (`ackedLsn`), and the WAL the slot keeps, for the sync's status and the metrics.
 * Every few seconds for each decoder, so both sides are kept cheap: the slot is read over a
 * kept connection (a new one per read was a backend start and a SCRAM exchange, a third of
 * an idle server's CPU), and the control row is written only when the figures moved by a
 * megabyte, the members changed or a minute went by.
 */
export class SlotLagReport {
  private last: { members: string; acked: string; lag: string | null; retention: Retention; at: number } | undefined;
  /** The server's WAL position as each recent report read it, oldest first (see loggedThrough). */
  private readonly samples: Array<{ at: number; wal: bigint }> = [];
  private lastThrough: number | undefined;

  constructor(private readonly options: { slot: string; databaseUrl: string; control: pg.Pool; pools?: IdlePools; lagRewriteMs?: number }) {}

  async report(syncIds: string[], ackedLsn: string): Promise<void> {
    const read = async (client: pg.ClientBase | pg.Pool) => {
      const { rows } = await client.query<{ lag: string | null; wal: string; confirmed: string | null } & Retention>(
        `SELECT greatest(0, pg_wal_lsn_diff(w.lsn, confirmed_flush_lsn))::bigint AS lag, w.lsn::text AS wal, confirmed_flush_lsn::text AS confirmed,
                greatest(0, pg_wal_lsn_diff(w.lsn, restart_lsn))::bigint AS retained, safe_wal_size AS safe, wal_status AS status
           FROM (SELECT pg_current_wal_lsn() AS lsn) w LEFT JOIN pg_replication_slots ON slot_name = $1`,
        [this.options.slot],
      );
      return rows[0]!;
    };
    const pool = this.options.pools?.get(this.options.databaseUrl);
    const { lag, wal, confirmed, retained, safe, status } = pool ? await read(pool) : await withClient(this.options.databaseUrl, read);
    const retention = { retained, safe, status };
    const through = this.loggedThrough(lsnToBigInt(wal), confirmed === null ? undefined : lsnToBigInt(confirmed));
    const last = this.last;
    const members = syncIds.join(',');
    if (
      last &&
      last.members === members &&
      Date.now() - last.at < (this.options.lagRewriteMs ?? UNCHANGED_REWRITE_MS) &&
      near(last, ackedLsn, lag) &&
      sameRetention(last.retention, retention)
    )
      return;
    // Every sync of the database reads through the one slot: each is as far behind as it.
    const { rowCount } = await this.options.control.query(
      `UPDATE decoder_progress SET acked_lsn = $2, slot_lag_bytes = $3, lag_at = now(), logged_through = $4,
              slot_retained_bytes = $5, slot_safe_bytes = $6, slot_wal_status = $7 WHERE sync_id = ANY($1)`,
      [syncIds, ackedLsn, lag, through === undefined ? null : new Date(through), retained, safe, status],
    );
    // A sync whose first event is not logged yet has no row to write to: nothing was written
    // for it, so the next report writes again rather than taking the figures as known.
    this.last = (rowCount ?? 0) >= syncIds.length ? { members, acked: ackedLsn, lag, retention, at: Date.now() } : undefined;
  }

  /**
   * The latest time at which the server's WAL position was no further than the slot's
   * confirmed one: every change committed before it is in the event log. Samples older than
   * the oldest one still needed are dropped, and at most an hour of them is kept (past that,
   * the oldest stands for "at least this far behind").
   */
  private loggedThrough(wal: bigint, confirmed: bigint | undefined): number | undefined {
    const now = Date.now();
    this.samples.push({ at: now, wal });
    while (this.samples.length > 1 && (now - this.samples[0]!.at > SAMPLES_KEPT_MS || (confirmed !== undefined && this.samples[1]!.wal <= confirmed))) {
      this.samples.shift();
    }
    if (confirmed === undefined) return undefined;
    const reached = this.samples[0]!;
    this.lastThrough = reached.wal <= confirmed ? reached.at : Math.min(reached.at, this.lastThrough ?? reached.at);
    return this.lastThrough;
  }

  /** Closes the kept connection (the decoder stopped; its database may be dropped next). */
  async close(): Promise<void> {
    await this.options.pools?.drop(this.options.databaseUrl);
  }
}

/** The slot's hold moved less than STEP_BYTES, and its wal_status is the same. */
function sameRetention(last: Retention, now: Retention): boolean {
  const close = (a: string | null, b: string | null) => (a === null || b === null ? a === b : Math.abs(Number(a) - Number(b)) < STEP_BYTES);
  return last.status === now.status && close(last.retained, now.retained) && close(last.safe, now.safe);
}

/** The figures moved less than STEP_BYTES since they were written. */
function near(last: { acked: string; lag: string | null }, acked: string, lag: string | null): boolean {
  const apart = (a: bigint, b: bigint) => (a > b ? a - b : b - a) < BigInt(STEP_BYTES);
  if ((last.lag === null) !== (lag === null)) return false;
  return apart(lsnToBigInt(last.acked), lsnToBigInt(acked)) && (lag === null || apart(BigInt(last.lag!), BigInt(lag)));
}
