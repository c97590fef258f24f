import type pg from 'pg';

/** What one comparison of a table with the upstream found, and fixed (sql/36_drift.sql). */
export interface DriftCounts {
  /** Rows the upstream has that the table did not. */
  missing: number;
  /** Rows the table held unlike the upstream's. */
  differing: number;
  /** Rows the table held that the upstream no longer has. */
  extra: number;
}

export const NO_DRIFT: DriftCounts = { missing: 0, differing: 0, extra: 0 };

export const driftTotal = (d: DriftCounts) => d.missing + d.differing + d.extra;

/** Drift is kept this long; the status sums the last 24 hours. */
const KEPT_DAYS = 7;

/** One sync's record of comparisons: its audit (Stripe) or its sweeps (Airtable) write it. */
export class DriftLog {
  constructor(
    private readonly control: pg.Pool,
    private readonly syncId: string,
    private readonly source: 'audit' | 'sweep',
  ) {}

  /**
   * Tables compared whole, each at its time, and what was `found` by table (the compared ones,
   * and tables they hold inline; a table named only in `found` is not marked compared). One
   * statement, however many tables: an Airtable sync writes it once a cycle. It also drops the
   * sync's drift older than KEPT_DAYS (the index on sync_id, found_at finds it).
   */
  async compared(tables: Array<{ table: string; at: Date }>, found: Map<string, DriftCounts>): Promise<void> {
    const drift = [...found].filter(([, d]) => driftTotal(d) > 0).map(([tbl, d]) => ({ tbl, ...d }));
    await this.control.query(
      `WITH compared AS (
         INSERT INTO sync_comparisons (sync_id, tbl, compared_at) SELECT $1, t.tbl, t.at FROM unnest($2::text[], $3::timestamptz[]) AS t(tbl, at)
         ON CONFLICT (sync_id, tbl) DO UPDATE SET compared_at = excluded.compared_at
       ), pruned AS (
         DELETE FROM sync_drift WHERE sync_id = $1 AND found_at < now() - make_interval(days => ${KEPT_DAYS})
       )
       INSERT INTO sync_drift (sync_id, tbl, source, missing, differing, extra)
       SELECT $1, d.tbl, $4, d.missing, d.differing, d.extra
         FROM jsonb_to_recordset($5::jsonb) AS d(tbl text, missing int, differing int, extra int)`,
      [this.syncId, tables.map((t) => t.table), tables.map((t) => t.at), this.source, JSON.stringify(drift)],
    );
  }

  /** The latest round: when it began, and whether it completed (else it was cut short). */
  async lastRound(): Promise<{ startedAt: Date; completed: boolean } | undefined> {
    const { rows } = await this.control.query<{ round_started_at: Date; last_started_at: Date | null }>(
      'SELECT round_started_at, last_started_at FROM sync_audits WHERE sync_id = $1',
      [this.syncId],
    );
    return rows[0] && { startedAt: rows[0].round_started_at, completed: rows[0].last_started_at?.getTime() === rows[0].round_started_at.getTime() };
  }

  async roundStarted(at: Date, sharePerSecond: number): Promise<void> {
    await this.control.query(
      `INSERT INTO sync_audits (sync_id, round_started_at, share_per_second) VALUES ($1, $2, $3)
       ON CONFLICT (sync_id) DO UPDATE SET round_started_at = excluded.round_started_at, share_per_second = excluded.share_per_second`,
      [this.syncId, at, sharePerSecond],
    );
  }

  async roundCompleted(started: Date, at: Date): Promise<void> {
    await this.control.query('UPDATE sync_audits SET last_started_at = $2, last_completed_at = $3, last_round_ms = $4 WHERE sync_id = $1', [
      this.syncId,
      started,
      at,
      at.getTime() - started.getTime(),
    ]);
  }
}

/** A sync's drift as the status shows it (sync-rows.ts reads it with the sync). */
export interface DriftStatus {
  audit: {
    sharePerSecond: number;
    roundStartedAt: Date;
    lastStartedAt: Date | null;
    lastCompletedAt: Date | null;
    lastRoundMs: number | null;
  } | null;
  last24h: DriftCounts;
  tables: Array<{ table: string; comparedAt: Date | null } & DriftCounts>;
}

/** The subquery of the sync's columns that reads its drift (`syncs` is the outer row). */
export const DRIFT_COLUMN = `(SELECT jsonb_build_object(
    'audit', (SELECT jsonb_build_object('share', a.share_per_second, 'started', a.round_started_at, 'last_started', a.last_started_at,
                'completed', a.last_completed_at, 'ms', a.last_round_ms)
                FROM sync_audits a WHERE a.sync_id = syncs.id),
    'tables', COALESCE((SELECT jsonb_agg(jsonb_build_object('table', t.tbl, 'compared', c.compared_at,
                'missing', COALESCE(d.missing, 0), 'differing', COALESCE(d.differing, 0), 'extra', COALESCE(d.extra, 0)) ORDER BY t.tbl)
       FROM (SELECT tbl FROM sync_comparisons WHERE sync_id = syncs.id
             UNION SELECT tbl FROM sync_drift WHERE sync_id = syncs.id AND found_at > now() - interval '24 hours') t
       LEFT JOIN sync_comparisons c ON c.sync_id = syncs.id AND c.tbl = t.tbl
       LEFT JOIN (SELECT tbl, sum(missing)::int AS missing, sum(differing)::int AS differing, sum(extra)::int AS extra FROM sync_drift
                   WHERE sync_id = syncs.id AND found_at > now() - interval '24 hours' GROUP BY tbl) d ON d.tbl = t.tbl), '[]'::jsonb)
  )) AS drift`;

export interface DriftRow {
  audit: { share: number; started: string; last_started: string | null; completed: string | null; ms: number | null } | null;
  tables: Array<{ table: string; compared: string | null; missing: number; differing: number; extra: number }>;
}

export function driftStatus(row: DriftRow): DriftStatus {
  const last24h = { ...NO_DRIFT };
  for (const t of row.tables) {
    last24h.missing += t.missing;
    last24h.differing += t.differing;
    last24h.extra += t.extra;
  }
  return {
    audit: row.audit && {
      sharePerSecond: row.audit.share,
      roundStartedAt: new Date(row.audit.started),
      lastStartedAt: row.audit.last_started === null ? null : new Date(row.audit.last_started),
      lastRoundMs: row.audit.ms === null ? null : Number(row.audit.ms),
      lastCompletedAt: row.audit.completed === null ? null : new Date(row.audit.completed),
    },
    last24h,
    tables: row.tables.map((t) => ({
      table: t.table,
      comparedAt: t.compared === null ? null : new Date(t.compared),
      missing: t.missing,
      differing: t.differing,
      extra: t.extra,
    })),
  };
}
