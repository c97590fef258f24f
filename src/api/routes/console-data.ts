import type Router from '@koa/router';
import type { Context } from 'koa';
import type pg from 'pg';
import type { SyncRecord } from '../../control/syncs.ts';
import { ident, withClient } from '../../db/sql.ts';
import { TributaryError, notFound } from '../../errors.ts';
import { ownOrigin } from '../auth.ts';
import type { ApiOptions } from '../context.ts';
import { findSync } from './syncs.ts';

/** What the console's read-only routes need beyond ApiOptions; main.ts passes it to createApiApp. */
export interface ConsoleDataOptions {
  /** `{proxy_url}` as users reach it (shown under Connect); a function when the port is known only once listening. */
  proxyUrl?: string | (() => string | undefined);
}

/** Tables at most this big (by the planner's estimate) are counted exactly; bigger ones show the estimate. */
const EXACT_COUNT_LIMIT = 200_000;
const MAX_HISTORY_HOURS = 24;
/** The chart's resolution: samples are merged into at most this many points. */
const HISTORY_POINTS = 240;


interface TableInfo {
  name: string;
  upstream_name: string | null;
  upstream_id: string | null;
  rows: number;
  rows_estimated: boolean;
  /** The event topic of the table's changes. */
  topic: string | null;
}

/** The collection of a table's events (as the decoder names it) and its upstream name, as the sync's kind says. */
function describe(api: ApiOptions, sync: SyncRecord, name: string, comment: string | null): Pick<TableInfo, 'upstream_name' | 'upstream_id' | 'topic'> {
  const kind = api.kinds.get(sync.kind);
  const { upstreamName, upstreamId } = kind.describeTable(name, comment);
  const collection = kind.events.collectionOf(name);
  return { upstream_name: upstreamName, upstream_id: upstreamId, topic: collection === undefined ? null : `svc.${sync.id}.${collection}` };
}

interface SyncDatabaseView {
  meta: { started_at: string | null; completed_at: string | null; duration_last: number | null; running: boolean } | null;
  tables: TableInfo[];
}

/** Reads `_sync_meta` and the tables of `public` with their row counts, in the sync's own database. */
async function readSyncDatabase(api: ApiOptions, sync: SyncRecord): Promise<SyncDatabaseView> {
  const url = await api.syncService.adminUrl(sync);
  try {
    return await withClient(url, async (client: pg.Client) => {
      await client.query("SET statement_timeout = '10s'");
      const { rows: listed } = await client.query<{ name: string; comment: string | null; estimate: string }>(
        // A table not yet analysed (reltuples -1, e.g. just swapped in) is estimated from the
        // statistics' live-row count instead, so a large one is not counted exactly.
        `SELECT c.relname AS name, obj_description(c.oid, 'pg_class') AS comment,
                (CASE WHEN c.reltuples >= 0 THEN c.reltuples ELSE coalesce(s.n_live_tup, 0) END)::bigint AS estimate
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> '_sync_meta'
          ORDER BY c.relname`,
      );
      const exact = listed.filter((t) => Number(t.estimate) < EXACT_COUNT_LIMIT);
      let counts: string[] = [];
      if (exact.length > 0) {
        // One round trip for every count; identifiers are quoted once, here. An ARRAY[…]
        // constructor, not a function call: functions take at most 100 arguments, and a
        // Stripe sync has more tables than that.
        const { rows } = await client.query<{ counts: string[] }>(
          `SELECT ARRAY[${exact.map((t) => `(SELECT count(*) FROM public.${ident(t.name)})`).join(', ')}]::bigint[] AS counts`,
        );
        counts = rows[0]!.counts;
      }
      const exactCount = new Map(exact.map((t, i) => [t.name, Number(counts[i] ?? 0)]));
      const { rows: metaRows } = await client.query<{ started_at: Date | null; completed_at: Date | null; duration_s: number | null }>(
        'SELECT started_at, completed_at, extract(epoch FROM duration_last)::float8 AS duration_s FROM public._sync_meta LIMIT 1',
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
          ...describe(api, sync, t.name, t.comment),
          rows: exactCount.get(t.name) ?? Math.max(0, Number(t.estimate)),
          rows_estimated: !exactCount.has(t.name),
        })),
      };
    });
  } catch (cause) {
    api.logger.warn({ err: cause, sync: sync.id }, 'console: could not read the sync database');
    throw new TributaryError('unavailable', 'the sync database could not be read just now; try again in a moment', { cause, expose: true });
  }
}

function hoursParam(ctx: Context): number {
  const raw = ctx.query.hours;
  if (raw === undefined) return 6;
  if (typeof raw !== 'string' || !/^\d{1,2}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_HISTORY_HOURS) {
    throw new TributaryError('invalid_request', `hours: must be a whole number from 1 to ${MAX_HISTORY_HOURS}`);
  }
  return Number(raw);
}

/** The topics of a sync: those the event log has, and those its tables will have. */
async function topicsOf(api: ApiOptions, sync: SyncRecord, tables: TableInfo[]): Promise<string[]> {
  const { rows } = await api.pool.query<{ topic: string }>('SELECT topic FROM event_topics WHERE sync_id = $1', [sync.id]);
  const topics = new Set(rows.map((r) => r.topic));
  for (const t of tables) if (t.topic) topics.add(t.topic);
  return [...topics].sort();
}

/**
 * Small read-only routes for what the console shows beyond the management API proper:
 * a sync's tables with row counts and upstream names, its cycle history and recent errors,
 * where to connect, and (on request) the account's event password.
 */
export function consoleDataRoutes(router: Router, api: ApiOptions & ConsoleDataOptions): void {
  const proxyUrl = () => (typeof api.proxyUrl === 'function' ? api.proxyUrl() : api.proxyUrl) ?? null;

  router.get('/api/syncs/:id/tables', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx), ctx.params.id!);
    const view = await readSyncDatabase(api, sync);
    ctx.body = { sync_meta: view.meta, data: view.tables };
  });

  router.get('/api/syncs/:id/history', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx), ctx.params.id!);
    const hours = hoursParam(ctx);
    const bucketSeconds = Math.max(5, Math.ceil((hours * 3600) / HISTORY_POINTS));
    const { rows: cycles } = await api.pool.query<{ at: Date; cycles: number; lag_s: number; duration_s: number }>(
      `SELECT max(at) AS at, sum(cycles)::int AS cycles, max(lag_s) AS lag_s, max(duration_s) AS duration_s
         FROM sync_cycles
        WHERE sync_id = $1 AND at > now() - make_interval(hours => $2)
        GROUP BY floor(extract(epoch FROM at) / $3)
        ORDER BY 1`,
      [sync.id, hours, bucketSeconds],
    );
    const { rows: errors } = await api.pool.query<{ at: Date; kind: string; message: string }>(
      'SELECT at, kind, message FROM sync_errors WHERE sync_id = $1 ORDER BY at DESC LIMIT 20',
      [sync.id],
    );
    ctx.body = {
      hours,
      bucket_seconds: bucketSeconds,
      cycles: cycles.map((c) => ({ at: c.at.toISOString(), cycles: c.cycles, lag_seconds: c.lag_s, duration_seconds: c.duration_s })),
      errors: errors.map((e) => ({ at: e.at.toISOString(), kind: e.kind, message: e.message })),
    };
  });

  router.get('/api/syncs/:id/connection', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx), ctx.params.id!);
    const account = await api.accounts.get(sync.accountId);
    const view = await readSyncDatabase(api, sync).catch(() => ({ tables: [] as TableInfo[] }));
    ctx.body = {
      sync_id: sync.id,
      wait_url: `${ownOrigin(ctx)}/api/wait/${sync.id}`,
      proxy_url: proxyUrl(),
      events: {
        username: account?.eventsUsername ?? null,
        rest_url: api.events.restUrl,
        kafka_brokers: api.events.kafkaBrokers,
        topic_prefix: `svc.${sync.id}.`,
        topics: await topicsOf(api, sync, view.tables),
      },
    };
  });

  // A POST, so that it is a deliberate act (the console's "Reveal"), never cached or prefetched.
  router.post('/api/syncs/:id/events-credentials', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx), ctx.params.id!);
    const account = await api.accounts.get(sync.accountId);
    const password = await api.accounts.eventsPassword(sync.accountId);
    if (!account || !password) throw notFound(`account ${sync.accountId}`);
    api.logger.info({ account: account.id, sync: sync.id }, 'event credentials revealed');
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { username: account.eventsUsername, password: password.reveal() };
  });
}
