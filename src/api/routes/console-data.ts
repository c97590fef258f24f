import type Router from '@koa/router';
import type { ErrorKind } from '../../sync/status-reporter.ts';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, notFound } from '../../errors.ts';
import { validateQuery, wholeNumber } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument, Operation } from '../openapi.ts';
import { type SyncDatabaseView, type SyncMeta, SyncTables } from '../sync-tables.ts';
import { CAPPED } from '../tenancy.ts';
import { time } from '../views.ts';
import { z } from '../zod.ts';
import { SYNC_NOT_FOUND, findSync, syncParams } from './syncs.ts';

/** What the console's read-only routes need beyond ApiOptions; main.ts passes it to createApiApp. */
export interface ConsoleDataOptions {
  /** `{proxy_url}` as users reach it (shown under Connect); a function when the port is known only once listening. */
  proxyUrl?: string | (() => string | undefined);
  /** The API's own address from the configuration (the wait URL is built on it, never on the request's Host). */
  apiUrl?: () => string;
}

const MAX_HISTORY_HOURS = 24;
/** The chart's resolution: samples are merged into at most this many points. */
const HISTORY_POINTS = 240;

const tableInfo = z
  .object({
    name: z.string().describe("The table's name in the sync's database"),
    upstream_name: z.string().nullable(),
    upstream_id: z.string().nullable(),
    rows: z
      .number()
      .int()
      .describe('Rows in the table: counted, as of at most 5 s ago (one count serves every request meanwhile), or estimated for big tables'),
    rows_estimated: z
      .boolean()
      .describe("`rows` is the planner's estimate (a table of 200,000 rows or more, or past the 1,000,000 rows counted per read), not a count"),
    topic: z.string().nullable().describe("The event topic of the table's changes"),
  })
  .strict();
type TableInfo = z.infer<typeof tableInfo>;

const syncDatabaseAnswer = z
  .object({
    sync_meta: z
      .object({ started_at: time.nullable(), completed_at: time.nullable(), duration_last: z.number().nullable(), running: z.boolean() })
      .strict()
      .nullable()
      .describe("The database's `_sync_meta` row"),
    data: z.array(tableInfo),
  })
  .strict();

const historyQuery = z.object({
  hours: wholeNumber(1, MAX_HISTORY_HOURS).optional().describe('How far back (default 6)'),
});

const historyAnswer = z
  .object({
    hours: z.number().int(),
    bucket_seconds: z.number().int().describe('Each point merges the samples of this many seconds'),
    cycles: z.array(z.object({ at: time, cycles: z.number().int(), lag_seconds: z.number(), duration_seconds: z.number() }).strict()),
    errors: z.array(z.object({ at: time, kind: z.enum(['transient', 'fatal', 'disk_full']), message: z.string() }).strict()).describe('The latest 20'),
  })
  .strict();

const connectionAnswer = z
  .object({
    sync_id: z.string(),
    wait_url: z.string(),
    proxy_url: z.string().nullable(),
    events: z
      .object({
        username: z.string().nullable(),
        rest_url: z.string(),
        kafka_brokers: z.array(z.string()),
        topic_prefix: z.string(),
        topics: z.array(z.string()),
      })
      .strict(),
  })
  .strict();

/** The collection of a table's events (as the decoder names it) and its upstream name, as the sync's kind says. */
function describe(api: ApiOptions, sync: SyncRecord, name: string, comment: string | null): Pick<TableInfo, 'upstream_name' | 'upstream_id' | 'topic'> {
  const kind = api.kinds.get(sync.kind);
  const { upstreamName, upstreamId } = kind.describeTable(name, comment);
  const collection = kind.events.collectionOf(name);
  return { upstream_name: upstreamName, upstream_id: upstreamId, topic: collection === undefined ? null : `svc.${sync.id}.${collection}` };
}

/** `_sync_meta` and the tables of the sync's database, with their upstream names and topics; a 503 when it cannot be read. */
async function readSyncDatabase(api: ApiOptions, syncTables: SyncTables, sync: SyncRecord): Promise<{ meta: SyncMeta | null; tables: TableInfo[] }> {
  let view: SyncDatabaseView;
  try {
    view = await syncTables.read(sync);
  } catch (cause) {
    api.logger.warn({ err: cause, sync: sync.id }, 'console: could not read the sync database');
    throw new TributaryError('unavailable', 'the sync database could not be read just now; try again in a moment', { cause, expose: true });
  }
  return {
    meta: view.meta,
    tables: view.tables.map((t) => ({ name: t.name, ...describe(api, sync, t.name, t.comment), rows: t.rows, rows_estimated: t.estimated })),
  };
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
export function consoleDataRoutes(router: Router, api: ApiOptions & ConsoleDataOptions, doc: ApiDocument): void {
  const syncTables = api.syncTables ?? new SyncTables({ syncService: api.syncService, logger: api.logger });
  const proxyUrl = () => (typeof api.proxyUrl === 'function' ? api.proxyUrl() : api.proxyUrl) ?? null;
  // Every one is a sync's, for its account's token or the operator's.
  const route = (op: Omit<Operation, 'tag' | 'access' | 'params'>) =>
    doc.route({ ...op, tag: 'console (internal)', access: 'token', params: syncParams, errors: { 404: SYNC_NOT_FOUND, ...op.errors } });

  route({
    method: 'get',
    path: '/api/syncs/:id/tables',
    operationId: 'consoleSyncTables',
    summary: "A sync's tables with row counts and upstream names",
    answers: { 200: { description: "The database's tables and `_sync_meta`", schema: syncDatabaseAnswer } },
    errors: { 429: CAPPED.reads, 503: 'The sync database could not be read just now' },
  });
  router.get('/api/syncs/:id/tables', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx, { capped: 'reads' }), ctx.params.id!);
    const view = await readSyncDatabase(api, syncTables, sync);
    ctx.body = { sync_meta: view.meta, data: view.tables } satisfies z.infer<typeof syncDatabaseAnswer>;
  });

  route({
    method: 'get',
    path: '/api/syncs/:id/history',
    operationId: 'consoleSyncHistory',
    summary: "A sync's cycle history and recent errors",
    query: historyQuery,
    answers: { 200: { description: 'Cycles merged into at most 240 points, and the latest errors', schema: historyAnswer } },
    errors: { 429: CAPPED.reads },
  });
  router.get('/api/syncs/:id/history', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx, { capped: 'reads' }), ctx.params.id!);
    const hours = validateQuery(historyQuery, ctx).hours ?? 6;
    const bucketSeconds = Math.max(5, Math.ceil((hours * 3600) / HISTORY_POINTS));
    const { rows: cycles } = await api.pool.query<{ at: Date; cycles: number; lag_s: number; duration_s: number }>(
      `SELECT max(at) AS at, sum(cycles)::int AS cycles, max(lag_s) AS lag_s, max(duration_s) AS duration_s
         FROM sync_cycles
        WHERE sync_id = $1 AND at > now() - make_interval(hours => $2)
        GROUP BY floor(extract(epoch FROM at) / $3)
        ORDER BY 1`,
      [sync.id, hours, bucketSeconds],
    );
    const { rows: errors } = await api.pool.query<{ at: Date; kind: ErrorKind; message: string }>(
      'SELECT at, kind, message FROM sync_errors WHERE sync_id = $1 ORDER BY at DESC LIMIT 20',
      [sync.id],
    );
    ctx.body = {
      hours,
      bucket_seconds: bucketSeconds,
      cycles: cycles.map((c) => ({ at: c.at.toISOString(), cycles: c.cycles, lag_seconds: c.lag_s, duration_seconds: c.duration_s })),
      errors: errors.map((e) => ({ at: e.at.toISOString(), kind: e.kind, message: e.message })),
    } satisfies z.infer<typeof historyAnswer>;
  });

  route({
    method: 'get',
    path: '/api/syncs/:id/connection',
    operationId: 'consoleSyncConnection',
    summary: 'Where to connect: the wait URL, the proxy and the event stream',
    answers: { 200: { description: "The sync's addresses and topics", schema: connectionAnswer } },
    errors: { 429: CAPPED.reads },
  });
  router.get('/api/syncs/:id/connection', async (ctx) => {
    const sync = await findSync(api, await api.authenticate(ctx, { capped: 'reads' }), ctx.params.id!);
    const account = await api.accounts.get(sync.accountId);
    const view = await readSyncDatabase(api, syncTables, sync).catch(() => ({ tables: [] as TableInfo[] }));
    ctx.body = {
      sync_id: sync.id,
      wait_url: `${api.publicOrigin ?? api.apiUrl?.() ?? `http://${ctx.socket.localAddress}:${ctx.socket.localPort}`}/api/wait/${sync.id}`,
      proxy_url: proxyUrl(),
      events: {
        username: account?.eventsUsername ?? null,
        rest_url: api.events.restUrl,
        kafka_brokers: api.events.kafkaBrokers,
        topic_prefix: `svc.${sync.id}.`,
        topics: await topicsOf(api, sync, view.tables),
      },
    } satisfies z.infer<typeof connectionAnswer>;
  });

  // A POST, so that it is a deliberate act (the console's "Reveal"), never cached or prefetched.
  route({
    method: 'post',
    path: '/api/syncs/:id/events-credentials',
    operationId: 'consoleRevealEventsCredentials',
    summary: "Reveal the account's event credentials",
    answers: {
      200: { description: "The sync's account's event username and password", schema: z.object({ username: z.string(), password: z.string() }).strict() },
    },
  });
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
