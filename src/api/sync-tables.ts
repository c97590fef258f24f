import type pg from 'pg';
import { liveTable, schemasOf } from '../syncdb/schemas.ts';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncRecord } from '../control/syncs.ts';
import { IdlePools } from '../db/idle-pools.ts';
import type { Logger } from '../log.ts';
import { KeyedLimit } from '../tenancy/keyed-limit.ts';
import { SharedReads } from '../tenancy/shared-reads.ts';

/** Tables at most this big (by the planner's estimate) may be counted exactly; bigger ones show the estimate. */
const EXACT_COUNT_LIMIT = 200_000;
/** Rows counted exactly in one read, all tables together (smallest first); the rest show the estimate. */
const EXACT_COUNT_BUDGET = 1_000_000;

export interface SyncTable {
  name: string;
  comment: string | null;
  rows: number;
  /** `rows` is the planner's estimate, not a count. */
  estimated: boolean;
}

export interface SyncMeta {
  started_at: string | null;
  completed_at: string | null;
  duration_last: number | null;
  running: boolean;
}

export interface SyncDatabaseView {
  meta: SyncMeta | null;
  tables: SyncTable[];
}

export interface SyncTablesOptions {
  syncService: SyncService;
  logger: Logger;
  /** How long one read's answer is served to every caller (default 5 s). */
  freshMs?: number;
  /** Reads of one account's sync databases running at once; more wait in line (default 2). */
  perAccount?: number;
}

/**
 * What the console shows of a sync's own database: `_sync_meta` and the tables of its schema
 * with their row counts. Once it opened a superuser connection per request and counted every
 * table each time, so a flood of requests opened hundreds of backends. Now a read goes through
 * one small pool per database (one connection, closed after 10 s unused), concurrent and
 * recent requests of a sync share one read (kept `freshMs`), and one account's reads of its
 * different syncs run `perAccount` at a time.
 */
export class SyncTables {
  private pools: IdlePools | undefined;
  private readonly shared: SharedReads<SyncDatabaseView>;
  private readonly perAccount: KeyedLimit;
  private closed = false;

  constructor(private readonly options: SyncTablesOptions) {
    this.shared = new SharedReads({ freshMs: options.freshMs ?? 5_000 });
    this.perAccount = new KeyedLimit(options.perAccount ?? 2);
  }

  read(sync: SyncRecord): Promise<SyncDatabaseView> {
    return this.shared.get(sync.id, async () => {
      const release = await this.perAccount.acquire(sync.accountId);
      try {
        return await this.load(sync);
      } finally {
        release();
      }
    });
  }

  /** The columns of each table of the sync's own schema, in table order (for checks of what a request names). */
  async columns(sync: SyncRecord): Promise<Map<string, string[]>> {
    const release = await this.perAccount.acquire(sync.accountId);
    try {
      const pool = this.pool(await this.options.syncService.adminUrl(sync));
      const { rows } = await pool.query<{ name: string; columns: string[] }>(
        `SELECT c.relname AS name, array_agg(a.attname::text ORDER BY a.attnum) AS columns
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
          GROUP BY c.relname ORDER BY c.relname`,
        [schemasOf(sync.schema).live],
      );
      return new Map(rows.map((row) => [row.name, row.columns]));
    } finally {
      release();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.pools?.close();
  }

  private pool(url: string): pg.Pool {
    if (this.closed) throw new Error('the sync-database reader is closed');
    this.pools ??= new IdlePools({
      max: 1,
      idleConnectionMs: 10_000,
      idlePoolMs: 60_000,
      sessionOptions: '-c statement_timeout=10s',
      // A deleted sync's database ends its connections: expected, so not a warning.
      onError: (err) => this.options.logger.debug({ err }, 'idle console connection to a sync database ended'),
    });
    return this.pools.get(url);
  }

  private async load(sync: SyncRecord): Promise<SyncDatabaseView> {
    const pool = this.pool(await this.options.syncService.adminUrl(sync));
    const schemas = schemasOf(sync.schema);
    const { rows: listed } = await pool.query<{ name: string; comment: string | null; estimate: string }>(
      // A table not yet analysed (reltuples -1, e.g. just swapped in) is estimated from the
      // statistics' live-row count instead, so a large one is not counted exactly.
      `SELECT c.relname AS name, obj_description(c.oid, 'pg_class') AS comment,
              (CASE WHEN c.reltuples >= 0 THEN c.reltuples ELSE coalesce(s.n_live_tup, 0) END)::bigint AS estimate
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
        WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname <> '_sync_meta'
        ORDER BY c.relname`,
      [schemas.live],
    );
    const exact = withinBudget(listed.map((t) => ({ name: t.name, estimate: Math.max(0, Number(t.estimate)) })));
    let counts: string[] = [];
    if (exact.length > 0) {
      // One round trip for every count; identifiers are quoted once, here. An ARRAY[…]
      // constructor, not a function call: functions take at most 100 arguments, and a
      // Stripe sync has more tables than that.
      const { rows } = await pool.query<{ counts: string[] }>(
        `SELECT ARRAY[${exact.map((name) => `(SELECT count(*) FROM ${liveTable(schemas, name)})`).join(', ')}]::bigint[] AS counts`,
      );
      counts = rows[0]!.counts;
    }
    const exactCount = new Map(exact.map((name, i) => [name, Number(counts[i] ?? 0)]));
    const { rows: metaRows } = await pool.query<{ started_at: Date | null; completed_at: Date | null; duration_s: number | null }>(
      `SELECT started_at, completed_at, extract(epoch FROM duration_last)::float8 AS duration_s FROM ${liveTable(schemas, '_sync_meta')} LIMIT 1`,
    );
    const meta = metaRows[0];
    return {
      meta: meta
        ? {
            started_at: meta.started_at?.toISOString() ?? null,
            completed_at: meta.completed_at?.toISOString() ?? null,
            duration_last: meta.duration_s,
            running: meta.started_at !== null && (meta.completed_at === null || meta.started_at > meta.completed_at),
          }
        : null,
      tables: listed.map((t) => ({
        name: t.name,
        comment: t.comment,
        rows: exactCount.get(t.name) ?? Math.max(0, Number(t.estimate)),
        estimated: !exactCount.has(t.name),
      })),
    };
  }
}

/** The tables to count exactly: each under EXACT_COUNT_LIMIT, smallest first, until EXACT_COUNT_BUDGET rows. */
function withinBudget(tables: Array<{ name: string; estimate: number }>): string[] {
  const chosen: string[] = [];
  let rows = 0;
  for (const table of [...tables].sort((a, b) => a.estimate - b.estimate)) {
    if (table.estimate >= EXACT_COUNT_LIMIT || rows + table.estimate > EXACT_COUNT_BUDGET) break;
    rows += table.estimate;
    chosen.push(table.name);
  }
  return chosen;
}
