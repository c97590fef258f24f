import type pg from 'pg';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncRecord, SyncStore } from '../control/syncs.ts';
import { connectionConfig, SYNC_DB_QUERY_TIMEOUT_MS } from '../db/connect.ts';
import { isTransientDbError } from '../db/transient.ts';
import { toError } from '../errors.ts';
import type { EventBus } from '../events/bus.ts';
import { sleep, Stopped } from '../events/webhooks/wait.ts';
import type { SourceKinds } from '../kinds/registry.ts';
import type { Runner } from '../lease/worker.ts';
import type { Logger } from '../log.ts';
import { type Backoff, FailureCount, retry } from '../retry.ts';
import { schemasOf } from '../syncdb/schemas.ts';
import { emitChunk } from './chunk.ts';
import { collectionTables } from './tables.ts';
import { type BackfillLimits, DEFAULT_BACKFILL_LIMITS } from './limits.ts';
import { KeyedRateLimits, type RateLimit } from '../events/webhooks/rate-limit.ts';
import { type Backfill, BackfillStore } from './store.ts';
import { openPool } from '../db/pool.ts';

export interface BackfillTuning {
  /** Rows read and emitted in one transaction. */
  chunkRows: number;
  /**
   * Chunks emitted and not yet logged, at most, besides the one being read: the runner reads
   * the next chunk while the decoder logs one. The decoder reads the WAL in order, so a live
   * change waits behind the chunks before it: few and small keeps that wait short
   * (bench/backfill.ts measured the trade; docs/performance.md).
   */
  chunksAhead: number;
  /** The longest between two looks for new backfills without a wakeup. */
  idleMs: number;
  /** The shortest between two looks, however many wakeups arrive (every logged batch is one). */
  lookGapMs: number;
  /** How long a chunk that keeps failing is tried again before the backfill fails. */
  patienceMs: number;
}

export const DEFAULT_BACKFILL_TUNING: BackfillTuning = { chunkRows: 250, chunksAhead: 2, idleMs: 30_000, lookGapMs: 1000, patienceMs: 120_000 };

export interface BackfillRunnerOptions {
  control: pg.Pool;
  syncs: SyncStore;
  syncService: SyncService;
  /** Which tables are which collection (the decoder's rules). */
  kinds: SourceKinds;
  bus: EventBus;
  logger: Logger;
  tuning?: Partial<BackfillTuning>;
  /** What one account's backfills may do (Config.backfillLimits). */
  limits?: BackfillLimits;
}

/** A chunk that failed: 200 ms doubling to 5 s. */
const CHUNK_BACKOFF: Backoff = { initialMs: 200, maxMs: 5_000 };
/** The runner's own bookkeeping failed: 1 s doubling to 30 s. */
const LOOP_BACKOFF: Backoff = { initialMs: 1_000, maxMs: 30_000 };

/**
 * Runs one sync's backfills on demand, beside its decoder (the decoder's lease makes it the
 * only runner of the sync): one at a time, oldest first, each from where it stands, so a
 * restart goes on where the last chunk left off.
 */
export function backfillRunner(options: BackfillRunnerOptions): (syncId: string) => Promise<Runner> {
  const tuning = { ...DEFAULT_BACKFILL_TUNING, ...options.tuning };
  const limits = options.limits ?? DEFAULT_BACKFILL_LIMITS;
  const store = new BackfillStore(options.control, limits);
  // One pace per account for every sync's backfills in this process.
  const paces = new KeyedRateLimits(limits.rowsPerSecond);
  return async (syncId) => {
    const controller = new AbortController();
    const logger = options.logger.child({ part: 'backfills', sync: syncId });
    let running: Promise<void> | undefined;
    const work = new BackfillWork({ ...options, tuning, limits, paces, store, syncId, logger, signal: controller.signal });
    return {
      start: () => {
        running ??= work.loop();
      },
      stop: async () => {
        controller.abort();
        await running;
      },
    };
  };
}

interface WorkOptions extends Omit<BackfillRunnerOptions, 'tuning' | 'limits'> {
  tuning: BackfillTuning;
  limits: BackfillLimits;
  paces: KeyedRateLimits;
  store: BackfillStore;
  syncId: string;
  signal: AbortSignal;
}

class BackfillWork {
  constructor(private readonly options: WorkOptions) {}

  async loop(): Promise<void> {
    const { bus, syncId, tuning, signal, store, logger } = this.options;
    const failures = new FailureCount(LOOP_BACKOFF);
    while (!signal.aborted) {
      const mark = bus.mark(syncId);
      try {
        const next = await store.next(syncId);
        failures.reset();
        if (next) {
          await this.run(next);
          continue;
        }
      } catch (error) {
        if (signal.aborted || error instanceof Stopped) return;
        logger.warn({ err: toError(error) }, 'backfill runner failed; trying again');
        await sleep(failures.next(), signal);
        continue;
      }
      await bus.changedSince(syncId, mark, tuning.idleMs, signal);
      await sleep(tuning.lookGapMs, signal);
    }
  }

  private async run(backfill: Backfill): Promise<void> {
    const { syncs, syncService, store, logger } = this.options;
    const sync = await syncs.get(backfill.syncId);
    if (sync?.state !== 'active') throw new Error(`sync ${backfill.syncId} is not active`);
    // Through the connection settings that keep a customer database's public-address mark; a
    // statement has the sync's own deadline, or a hung path would hold the backfill for good.
    const pool = openPool({ ...connectionConfig(await syncService.adminUrl(sync)), max: 1, query_timeout: SYNC_DB_QUERY_TIMEOUT_MS }, (err) =>
      logger.debug({ err }, 'backfill connection to the sync database ended'),
    );
    const log = logger.child({ backfill: backfill.id });
    log.info({ collections: backfill.collections, from: backfill.position, destination: backfill.destinationId, reason: backfill.reason }, 'backfill running');
    const { limit: pace, release } = this.options.paces.acquire(backfill.accountId);
    try {
      const outcome = await this.read(pool, sync, backfill, pace);
      if (outcome === 'done') {
        await store.finish(backfill.id, 'done');
        log.info('backfill done');
      }
    } catch (error) {
      if (this.options.signal.aborted || error instanceof Stopped) throw new Stopped();
      // A database away for now (a restart, a crash): the backfill stays where it stands and the
      // loop tries it again, from there, after its back-off. Only other errors end it.
      if (isTransientDbError(error)) throw error;
      const message = toError(error).message.slice(0, 300);
      log.warn({ err: toError(error) }, 'backfill failed');
      await store.finish(backfill.id, 'failed', message);
    } finally {
      release();
      await pool.end().catch(() => undefined);
    }
  }

  /** Reads every collection from where the backfill stands; 'stopped' when it was canceled meanwhile. */
  private async read(pool: pg.Pool, sync: SyncRecord, backfill: Backfill, pace: RateLimit): Promise<'done' | 'stopped'> {
    const { store, tuning, signal } = this.options;
    const schema = schemasOf(sync.schema).live;
    const tables = await collectionTables(pool, schema, this.options.kinds.get(sync.kind).events);
    const unlogged: string[] = [];
    let after = backfill.lastKey;
    const budget = new DayBudget(store, backfill, this.options.limits.rowsPerDay);
    for (let position = backfill.position; position < backfill.collections.length; position++, after = null) {
      const target = tables.get(backfill.collections[position]!);
      // A collection whose table went (upstream deleted it) has nothing left to read.
      while (target) {
        await budget.check();
        await pace.take(signal, tuning.chunkRows);
        const request = {
          backfillId: backfill.id,
          destinationId: backfill.destinationId,
          schema,
          table: target.table,
          key: target.key,
          after,
          limit: tuning.chunkRows,
        };
        const chunk = await retry(() => emitChunk(pool, request), {
          backoff: CHUNK_BACKOFF,
          patienceMs: tuning.patienceMs,
          signal,
          // A table dropped under the chunk: the collection is done.
          classify: (error) => ((error as { code?: string }).code === '42P01' ? 'fatal' : 'retry'),
          onRetry: (error) => {
            if (!isTransientDbError(error)) this.options.logger.warn({ err: toError(error), backfill: backfill.id }, 'backfill chunk failed; trying again');
          },
        }).catch((error: unknown) => {
          if ((error as { code?: string }).code === '42P01') return undefined;
          throw error;
        });
        if (signal.aborted) throw new Stopped();
        if (!chunk || chunk.rows === 0) break;
        after = chunk.lastKey;
        budget.spent(chunk.rows);
        if (!(await store.advance(backfill.id, chunk.rows, position, after))) return 'stopped';
        unlogged.push(chunk.lsn!);
        while (unlogged.length > tuning.chunksAhead) await this.logged(unlogged.shift()!);
      }
      if (!(await store.advance(backfill.id, 0, position + 1, null))) return 'stopped';
    }
    // Done once its last read is in the log, so a consumer told "done" finds every read there.
    const last = unlogged.at(-1);
    if (last) await this.logged(last);
    return 'done';
  }

  /** Waits until the sync's event log holds everything up to `lsn`. */
  private async logged(lsn: string): Promise<void> {
    const { bus, control, syncId, signal } = this.options;
    while (!signal.aborted) {
      const mark = bus.mark(syncId);
      const { rows } = await control.query<{ done: boolean }>('SELECT lsn >= $2::pg_lsn AS done FROM decoder_progress WHERE sync_id = $1', [syncId, lsn]);
      if (rows[0]?.done) return;
      await bus.changedSince(syncId, mark, 1_000, signal);
    }
    throw new Stopped();
  }
}

/**
 * The rows an account's backfills may still read today, looked up again when this backfill
 * has used what was left or every RECHECK_ROWS (backfills of the account's other syncs read too).
 */
class DayBudget {
  private static readonly RECHECK_ROWS = 10_000;
  private left: number | undefined;
  private sinceCheck = 0;

  constructor(
    private readonly store: BackfillStore,
    private readonly backfill: Backfill,
    private readonly rowsPerDay: number,
  ) {}

  spent(rows: number): void {
    if (this.left !== undefined) this.left -= rows;
    this.sinceCheck += rows;
  }

  /** Throws, ending the backfill as failed, once the account has read its day's rows. */
  async check(): Promise<void> {
    // The re-read after a lost slot makes the stream whole again: no day's budget stops it.
    if (this.backfill.reason !== 'requested') return;
    if (this.left === undefined || this.left <= 0 || this.sinceCheck >= DayBudget.RECHECK_ROWS) {
      this.left = await this.store.rowsLeftToday(this.backfill.accountId);
      this.sinceCheck = 0;
    }
    if (this.left <= 0) {
      throw new Error(
        `stopped: this account's backfills have read their ${this.rowsPerDay} rows of the last day (TRIBUTARY_BACKFILL_ROWS_PER_DAY_PER_ACCOUNT); ask again later`,
      );
    }
  }
}
