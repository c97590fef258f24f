import { setMaxListeners } from 'node:events';
import type pg from 'pg';
import type { SecretBox } from '../../control/secrets.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import type { EventLogReader } from '../log.ts';
import type { LookupAll } from '../../http/address.ts';
import { DeliveryLog } from './deliveries.ts';
import { WebhookStore } from './destinations.ts';
import { DestinationControls } from './destination-controls.ts';
import { restartKey, settingsKey, settingsOf, workerDestination, type WorkerDestination } from './destination-settings.ts';
import { DestinationWorker } from './destination-worker.ts';
import { LaneCursors } from './lane-cursors.ts';
import { DEFAULT_TUNING, type DelivererTuning } from './tuning.ts';
import { retrySchedule, type RetrySchedule } from './schedule.ts';
import { createSender } from './send.ts';
import type { SharedBounds } from './shared-bounds.ts';
import { sleep } from './wait.ts';

export interface SupervisorTuning {
  /** The longest between two looks at the sync's destinations without a wakeup. */
  refreshMs: number;
  /** The shortest between two looks, however many wakeups arrive. */
  reloadGapMs: number;
  /** How long delivered rows stay in the delivery log (exhausted ones stay until replayed). */
  historyMs: number;
  /** Exhausted deliveries kept per destination: past it the oldest are dropped (and counted). */
  maxExhausted: number;
  pruneEveryMs: number;
}

export const DEFAULT_SUPERVISOR_TUNING: SupervisorTuning = {
  refreshMs: 5_000,
  reloadGapMs: 200,
  historyMs: 7 * 86_400_000,
  maxExhausted: 10_000,
  pruneEveryMs: 600_000,
};

export interface WebhookDelivererOptions {
  /** The control database (destinations, the delivery log, the event log). */
  pool: pg.Pool;
  /** Unseals destination secrets. */
  box: SecretBox;
  syncId: string;
  reader: EventLogReader;
  bus: EventBus;
  logger: Logger;
  /** Operator option: deliver to loopback and private addresses (config.webhookAllowPrivate). */
  allowPrivate: boolean;
  schedule?: Partial<RetrySchedule>;
  tuning?: Partial<DelivererTuning & SupervisorTuning>;
  signal?: AbortSignal;
  /** Bounds shared across the process's webhooks: attempts per host and per account, events held per account. */
  bounds?: SharedBounds;
  /** Name resolution for the public-address check (tests). */
  lookup?: LookupAll;
  random?: () => number;
}

export interface WebhookDeliverer {
  stop(): Promise<void>;
}

/**
 * Delivers every webhook destination of one sync: one worker per enabled destination,
 * started, stopped, restarted or updated as destinations are created, deleted, disabled,
 * enabled and changed (it looks again on every event-bus wakeup for the sync, at most every
 * reloadGapMs, and every refreshMs anyway). Run one deliverer per sync at a time, beside the
 * sync's decoder.
 */
export function startWebhookDeliverer(options: WebhookDelivererOptions): WebhookDeliverer {
  const { pool, box, syncId, reader, bus } = options;
  const schedule = retrySchedule(options.schedule);
  const tuning = { ...DEFAULT_TUNING, ...DEFAULT_SUPERVISOR_TUNING, ...options.tuning };
  const logger = options.logger.child({ part: 'webhooks', sync: syncId });
  const store = new WebhookStore(pool, box);
  const controls = new DestinationControls(pool, box);
  const log = new DeliveryLog(pool);
  const cursors = new LaneCursors(pool);
  const sender = createSender({
    allowPrivate: options.allowPrivate,
    timeoutMs: schedule.timeoutMs,
    maxSockets: tuning.lanes,
    ...(options.lookup ? { lookup: options.lookup } : {}),
  });
  const controller = new AbortController();
  const signal = controller.signal;
  setMaxListeners(0, signal);
  const onAbort = () => controller.abort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) controller.abort();

  /** Per destination: its worker, the replay generation it has looked at, and what it was started and set with. */
  const workers = new Map<string, { worker: DestinationWorker; generation: string; restart: string; settings: string; release?: () => void }>();
  const unusable = new Set<string>();
  const stopping = new Set<Promise<void>>();

  const stopWorker = (id: string, removed: boolean) => {
    const running = workers.get(id);
    if (!running) return;
    workers.delete(id);
    const done = running.worker
      .stop()
      .finally(() => running.release?.())
      .finally(() => stopping.delete(done));
    stopping.add(done);
    if (removed) logger.info({ destination: id }, 'webhook destination removed; its deliveries stopped');
  };

  /**
   * Brings the workers in step with the destinations: stops those of deleted or disabled
   * ones, restarts those whose URL or topics changed or whose cursor was moved back (from
   * what the stopped worker saved), updates the others in place (filter, rate, secret), and
   * starts those of new or re-enabled ones.
   */
  async function reconcile(): Promise<void> {
    let destinations = await store.forDeliverer(syncId);
    let stopped = false;
    for (const destination of destinations) {
      const running = workers.get(destination.id);
      if (!running) continue;
      // A worker that stopped by itself (it failed, or disabled its destination, which may be
      // enabled again already) logged why; the others stop for what changed.
      const disabled = destination.disabledAt !== null;
      if (!running.worker.hasStopped && !disabled && running.restart === restartKey(destination)) continue;
      workers.delete(destination.id);
      await running.worker.stop().finally(() => running.release?.());
      stopped = true;
      if (disabled) logger.info({ destination: destination.id, reason: destination.disabledReason }, 'webhook destination disabled; its deliveries stopped');
    }
    // Where the stopped workers got to is where they start again.
    if (stopped) destinations = await store.forDeliverer(syncId);
    const seen = new Set<string>();
    for (const row of destinations) {
      seen.add(row.id);
      if (row.disabledAt !== null) continue;
      const running = workers.get(row.id);
      if (running) {
        if (running.settings !== settingsKey(row)) {
          try {
            running.worker.update(settingsOf(row));
            running.settings = settingsKey(row);
            logger.debug({ destination: row.id }, 'webhook destination settings changed; its delivery goes on with them');
          } catch (error) {
            logger.warn({ err: toError(error), destination: row.id }, 'cannot unseal the webhook secret; still signing with the one before');
          }
        }
        if (running.generation !== row.replayGeneration) {
          running.generation = row.replayGeneration;
          running.worker.refreshQueued().catch((error: unknown) => {
            if (!signal.aborted) logger.warn({ err: toError(error), destination: row.id }, 'could not look for replayed deliveries');
          });
        }
        continue;
      }
      let destination: WorkerDestination;
      try {
        destination = workerDestination(row);
      } catch (error) {
        if (!unusable.has(row.id))
          logger.error({ err: toError(error), destination: row.id }, 'cannot unseal the webhook secret; not delivering to this destination');
        unusable.add(row.id);
        continue;
      }
      unusable.delete(row.id);
      const shared = options.bounds?.acquire(destination.url, row.accountId);
      const worker = new DestinationWorker({
        syncId,
        destination,
        store,
        controls,
        log,
        cursors,
        reader,
        bus,
        sender,
        schedule,
        tuning,
        logger,
        ...(shared ? { shared: shared.attempts, held: shared.held } : {}),
        ...(options.random ? { random: options.random } : {}),
      });
      workers.set(row.id, {
        worker,
        generation: row.replayGeneration,
        restart: restartKey(row),
        settings: settingsKey(row),
        ...(shared ? { release: shared.release } : {}),
      });
      worker.start();
      logger.debug({ destination: row.id, cursor: row.cursorSeq }, 'delivering to webhook destination');
    }
    for (const id of [...workers.keys()]) if (!seen.has(id)) stopWorker(id, true);
  }

  const running = (async () => {
    let lastPrune = Date.now();
    while (!signal.aborted) {
      const mark = bus.mark(syncId);
      try {
        await reconcile();
        if (Date.now() - lastPrune >= tuning.pruneEveryMs && workers.size > 0) {
          lastPrune = Date.now();
          const pruned = await log.prune([...workers.keys()], tuning.historyMs);
          if (pruned > 0) logger.debug({ pruned }, 'pruned delivered rows from the webhook delivery log');
          for (const id of workers.keys()) {
            const dropped = await log.dropExhausted(id, tuning.maxExhausted);
            if (dropped > 0) {
              logger.warn({ destination: id, dropped, kept: tuning.maxExhausted }, 'dropped the oldest exhausted webhook deliveries past the cap');
            }
          }
        }
      } catch (error) {
        if (signal.aborted) break;
        logger.warn({ err: toError(error) }, 'could not load webhook destinations; retrying');
      }
      await bus.changedSince(syncId, mark, tuning.refreshMs, signal);
      // However many wakeups arrive (one per logged batch), look at most this often.
      await sleep(tuning.reloadGapMs, signal);
    }
  })();

  return {
    async stop() {
      controller.abort();
      options.signal?.removeEventListener('abort', onAbort);
      await running;
      for (const id of [...workers.keys()]) stopWorker(id, false);
      await Promise.all([...stopping]);
      sender.close();
    },
  };
}
