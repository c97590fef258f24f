import type { AttachmentLinks } from '../attachments/links.ts';
import type pg from 'pg';
import { connectionConfig, SYNC_DB_QUERY_TIMEOUT_MS } from '../db/connect.ts';
import { dropIdleAfterTimeout } from '../db/drop-idle.ts';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncRecord, SyncStore } from '../control/syncs.ts';
import type { SourceKind } from '../kinds/kind.ts';
import { type SourceKinds, schemaOf } from '../kinds/registry.ts';
import { migrateSyncDatabase } from '../syncdb/migrate.ts';
import type { Logger } from '../log.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { upstreamBase } from '../upstream/http.ts';
import type { PassRequests } from './passes.ts';
import { guardReader } from './reader-guard.ts';
import type { Runner } from '../lease/worker.ts';
import { schemasOf } from '../syncdb/schemas.ts';
import { logUnlessDeleted } from './routine-failure.ts';
import { Liveness } from './liveness.ts';
import { StatusReporter } from './status-reporter.ts';
import { busySessions } from './busy-sessions.ts';
import { pause } from '../time.ts';
import { toError } from '../errors.ts';
import { openPool } from '../db/pool.ts';

/**
 * A runner that reports nothing this long (no pass, no cycle, no page, no failure) is taken for
 * stuck and started again. Every wait of a healthy runner is shorter: its passes come every few
 * seconds, a lockout or a back-off ends within minutes, and a statement against its database
 * fails after SYNC_DB_QUERY_TIMEOUT_MS.
 */
export const SYNC_STUCK_MS = 15 * 60_000;
/** How long a stuck runner's stop may take before its successor starts anyway. */
const STOP_GRACE_MS = 10_000;

/**
 * Stops a runner, waiting at most STOP_GRACE_MS: its signal is aborted at once, so whatever it
 * waits on ends, and a runner stuck past that ends at its next step, with nothing more to do.
 */
async function stopWithin(runner: Runner): Promise<void> {
  await Promise.race([runner.stop().catch(() => undefined), pause(STOP_GRACE_MS)]);
}

export interface RunnerFactoryOptions {
  control: pg.Pool;
  store: SyncStore;
  syncService: SyncService;
  limiter: QuotaLimiter;
  upstreams: Map<string, string>;
  logger: Logger;
  /** The kinds of sync this service runs. */
  kinds: SourceKinds;
  /** Each kind's tunables for tests and benchmarks, by kind name. */
  tunables?: Record<string, unknown>;
  /** Wait requests (PassSignals): a sync someone waits on starts its next pass early. */
  passRequests?: PassRequests;
  /** How often a running sync puts its reader role back as provisioned (default 5 min). */
  readerCheckMs?: number;
  /** TRIBUTARY_PUBLIC_URL: where upstreams can notify syncs of kinds that take notifications. */
  publicOrigin?: string;
  /** Stable attachment links, for kinds with `attachments` (their settings say whether the columns hold them). */
  attachmentLinks?: AttachmentLinks;
}

/**
 * Counts a 429 that upstream answered one of the sync's own requests (`upstream_429s`, read by
 * /metrics; rare by design, the quota keeps the sync under the limit, so one write each), and
 * shows it in the sync's status (`slowed_by`, for a minute) with a warning in the log at most
 * once a minute: a sync held back by other clients' requests to the same upstream must not look
 * like one syncing as usual.
 */
function rateLimitCounter(control: pg.Pool, syncId: string, logger: Logger): (note: string) => void {
  let warnedAt = 0;
  return (note) => {
    if (Date.now() - warnedAt >= 60_000) {
      warnedAt = Date.now();
      logger.warn({ note }, 'the upstream answered 429 (too many requests)');
    }
    control
      .query('UPDATE syncs SET upstream_429s = upstream_429s + 1, slowed_by = $2, slowed_at = now() WHERE id = $1', [syncId, note])
      .catch((err: unknown) => logger.warn({ err }, 'could not count an upstream 429'));
  };
}

/**
 * How long a sync-database connection may stay idle. Longer than the longest gap between an idle
 * sync's touches of its database (a quiet Stripe account's `_sync_meta` every 15 s): with
 * pg-pool's 10 s default each touch started a server process, which for hundreds of quiet
 * syncs was a third of the server's CPU. The pool hands out its latest-used connection first,
 * so only the extra ones end.
 */
const SYNC_DB_IDLE_MS = 60_000;

/** A sync's own statements have this deadline unless the operator sets another (db/connect.ts). */
export { SYNC_DB_QUERY_TIMEOUT_MS };

function targetPool(url: string, active: () => Promise<boolean>, logger: Logger, queryTimeoutMs: number): pg.Pool {
  const failed = logUnlessDeleted(active, logger);
  // The database dropped WITH FORCE as the sync is deleted mid-cycle ends checked-out connections too.
  const pool = openPool(
    { ...connectionConfig(url), max: 4, idleTimeoutMillis: SYNC_DB_IDLE_MS, query_timeout: queryTimeoutMs },
    (err) => void failed(err, 'idle sync-database connection failed'),
  );
  dropIdleAfterTimeout(pool);
  return pool;
}

/** Builds the runner for a sync of any kind; the worker only knows "start" and "stop". */
export function runnerFactory(options: RunnerFactoryOptions): (syncId: string) => Promise<Runner> {
  return async (syncId) => {
    const sync = await options.store.get(syncId);
    if (sync?.state !== 'active') throw new Error(`sync ${syncId} is not active`);
    const kind = options.kinds.get(sync.kind);
    const logger = options.logger.child({ sync: sync.id });
    const active = async () => (await options.store.get(sync.id))?.state === 'active';
    const adminUrl = await options.syncService.adminUrl(sync);
    const target = targetPool(adminUrl, active, logger, (options.tunables?.syncDbQueryTimeoutMs as number | undefined) ?? SYNC_DB_QUERY_TIMEOUT_MS);
    const schemas = schemasOf(sync.schema);
    // A database made by an older release gets the bookkeeping steps it lacks before the runner reads it.
    await migrateSyncDatabase(target, schemaOf(kind), schemas, logger).catch(async (error: unknown) => {
      await target.end();
      throw error;
    });
    let liveness = new Liveness();
    const hookUrl = hookUrlOf(options.publicOrigin, kind, sync.id);
    const context = {
      sync,
      control: options.control,
      target,
      schemas,
      key: await options.store.apiKey(sync.id),
      baseUrl: upstreamBase(options.upstreams, kind.upstreamHost),
      limiter: options.limiter,
      logger,
      loadSettings: async () => (await options.store.get(sync.id))?.settings ?? sync.settings,
      passRequests: options.passRequests,
      onRateLimited: rateLimitCounter(options.control, sync.id, logger),
      tunables: options.tunables?.[kind.name],
      attachmentLinks: kind.attachments ? options.attachmentLinks?.forSync(sync.id) : undefined,
      hooks: hookUrl ? { url: hookUrl, save: (hookId: string, secret: string) => options.store.saveHook(sync.id, hookId, secret) } : undefined,
    };
    // Each runner its own signs of life: a stuck one's stray reports must not cover for its successor.
    let runner = kind.runner({ ...context, liveness });
    let guard: { stop(): void } | undefined;
    const stuckMs = (options.tunables?.syncStuckMs as number | undefined) ?? SYNC_STUCK_MS;
    let restarting = false;
    let stopped = false;
    // A runner stuck on something no deadline covers (a bug, a lost wake-up) is started again: said
    // in its status and in one log line. Its signal is aborted, so it ends at its next step.
    const watchdog = setInterval(
      async () => {
        if (restarting || liveness.silentMs() < stuckMs) return;
        restarting = true;
        const silentS = Math.round(liveness.silentMs() / 1000);
        try {
          // Read before the stop: what held the runner may end with it.
          const sessions = await busySessions(adminUrl).catch((error: unknown) => [`unreadable: ${toError(error).message}`]);
          logger.warn({ silent_s: silentS, sessions }, "a stuck sync runner's database: the sessions busy when it was taken for stuck");
          await stopWithin(runner);
          const status = new StatusReporter({ control: options.control, target, schemas, syncId: sync.id, logger });
          await status.failed(`stuck: nothing read, written or failed for ${silentS} s; started again`, 'transient').catch(() => undefined);
          if (stopped) return;
          liveness = new Liveness();
          runner = kind.runner({ ...context, liveness });
          runner.start();
        } catch (error) {
          logger.error({ err: toError(error) }, 'a stuck sync runner could not be started again; its lease will move it');
        } finally {
          restarting = false;
        }
      },
      Math.max(50, Math.min(stuckMs / 4, 60_000)),
    );
    watchdog.unref();
    return {
      start: () => {
        // A shared database's reader is its first sync's: that sync's runner guards it, with its limits.
        if (sync.databaseOf === null) guard = guardReader(sync, options.syncService, logger, options.readerCheckMs);
        runner.start();
      },
      stop: async () => {
        stopped = true;
        clearInterval(watchdog);
        guard?.stop();
        // Within a grace: one stuck runner must not hold up the lease worker, and every sync with it.
        await stopWithin(runner);
        await target.end();
      },
    };
  };
}

/** Where a sync's inbound deliveries come (the hooks route), the URL it registers upstream: for a kind that takes them, with a public URL. */
function hookUrlOf(publicOrigin: string | undefined, kind: SourceKind, syncId: string): string | undefined {
  return kind.inbound && publicOrigin ? `${publicOrigin}/hooks/${kind.name}/${syncId}` : undefined;
}

/** What a deleted sync left upstream, removed by its kind (Airtable's webhook). */
export function upstreamCleanup(
  options: Pick<RunnerFactoryOptions, 'kinds' | 'store' | 'syncService' | 'upstreams' | 'limiter' | 'logger' | 'control' | 'publicOrigin'>,
) {
  return async (sync: SyncRecord): Promise<void> => {
    const kind = options.kinds.get(sync.kind);
    if (!kind.cleanup) return;
    // The sync is being deleted: a connection lost here is part of that.
    const target = targetPool(await options.syncService.adminUrl(sync), async () => false, options.logger, SYNC_DB_QUERY_TIMEOUT_MS);
    try {
      await kind.cleanup({
        sync,
        target,
        schemas: schemasOf(sync.schema),
        key: await options.store.apiKey(sync.id),
        baseUrl: upstreamBase(options.upstreams, kind.upstreamHost),
        limiter: options.limiter,
        logger: options.logger,
        control: options.control,
        hookUrl: hookUrlOf(options.publicOrigin, kind, sync.id),
      });
    } finally {
      await target.end();
    }
  };
}
