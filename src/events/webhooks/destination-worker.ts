import { setMaxListeners } from 'node:events';
import type { Secret } from '../../control/secrets.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import type { EventLogReader, LoggedEvent } from '../log.ts';
import type { AttemptOutcome, DeliveryLog, QueuedDelivery } from './deliveries.ts';
import type { WebhookStore } from './destinations.ts';
import { type Item, itemOfEvent, itemOfRow, type Lane, laneOf, newLane } from './lanes.ts';
import { Parking } from './parking.ts';
import { ReadAhead } from './read-ahead.ts';
import { isExhausted, retryDelay, type RetrySchedule } from './schedule.ts';
import type { Sender } from './send.ts';
import { webhookSigner, type WebhookSigner } from './signature.ts';
import { type Backoff, retry } from '../../retry.ts';
import type { DelivererTuning } from './tuning.ts';
import { Notifier, Stopped } from './wait.ts';
import { BackoffWakeups } from './backoff-wakeups.ts';

/** Bookkeeping in the control database: 200 ms doubling to 10 s, until it succeeds or the worker stops. */
const BOOKKEEPING_BACKOFF: Backoff = { initialMs: 200, maxMs: 10_000 };

export interface DestinationWorkerOptions {
  syncId: string;
  destination: { id: string; url: URL; topics: string[]; secret: Secret; cursorSeq: string };
  store: WebhookStore;
  log: DeliveryLog;
  reader: EventLogReader;
  bus: EventBus;
  sender: Sender;
  schedule: RetrySchedule;
  tuning: DelivererTuning;
  logger: Logger;
  random?: () => number;
}

/**
 * Delivers one destination's events. Order of durability: an event delivered in memory
 * mode is final at its 2xx; a parked event counts as accounted for once its row is
 * written. The cursor is saved (every flushMs) only up to just before the oldest event
 * that is neither, so a crash re-delivers from there: at-least-once, same webhook-id.
 */
export class DestinationWorker {
  private readonly controller = new AbortController();
  private readonly signal = this.controller.signal;
  private readonly lanes: Lane[];
  private readonly logger: Logger;
  private readonly reading: ReadAhead;
  private savedCursor: bigint;
  private delivered = 0;
  private failedAttempts = 0;
  private readonly flushWakeup = new Notifier();
  private readonly parking = new Parking(this.flushWakeup);
  private readonly roomFreed = new Notifier();
  /** Notified at the end of each flush: the counters it found are saved. */
  private readonly progressSaved = new Notifier();
  /** Ends back-offs early: the destination answering again, or replays asked for. */
  private readonly wakeups = new BackoffWakeups();
  private running: Promise<void> | undefined;
  private failed = false;
  private readonly sign: WebhookSigner;

  constructor(private readonly options: DestinationWorkerOptions) {
    this.logger = options.logger.child({ destination: options.destination.id });
    // Every lane waits on this signal.
    setMaxListeners(0, this.signal);
    const { syncId, destination, reader, bus, tuning } = options;
    this.reading = new ReadAhead(
      {
        syncId,
        destinationId: destination.id,
        topics: destination.topics,
        reader,
        bus,
        tuning,
        signal: this.signal,
        pending: () => this.pending(),
        roomFreed: this.roomFreed,
        dispatch: (event) => this.dispatch(event),
        db: (work) => this.db(work),
      },
      BigInt(destination.cursorSeq),
    );
    this.savedCursor = this.reading.seq;
    this.lanes = Array.from({ length: tuning.lanes }, (_, index) => newLane(index));
    this.sign = webhookSigner(destination.secret);
    // Stopping wakes every loop: one abort listener here, not one per wait.
    const notifiers = [
      this.flushWakeup,
      this.parking.written,
      this.roomFreed,
      this.reading.caughtUpWakeup,
      this.wakeups.notifier,
      this.progressSaved,
      ...this.lanes.map((lane) => lane.wakeup),
    ];
    this.signal.addEventListener(
      'abort',
      () => {
        for (const n of notifiers) n.close();
      },
      { once: true },
    );
  }

  /** True once the worker has stopped by itself after an unexpected error. */
  get hasFailed(): boolean {
    return this.failed;
  }

  get id(): string {
    return this.options.destination.id;
  }

  start(): void {
    this.running ??= this.run();
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.running;
  }

  /**
   * Replays were requested: lanes with queued rows switch to queue mode, and lanes waiting
   * out a back-off try now (a user asked to retry them).
   */
  async refreshQueued(): Promise<void> {
    this.wakeups.retryRequested();
    const lanes = await this.db(() => this.options.log.queuedLanes(this.id));
    for (const index of lanes) {
      const lane = this.lanes[index];
      if (!lane) continue;
      // Also when already in queue mode: it may be about to leave it, having looked before the replay.
      lane.queueRequested = true;
      lane.wakeup.notify();
    }
  }

  private async run(): Promise<void> {
    const { log, tuning } = this.options;
    try {
      await this.db(() => log.relane(this.id, tuning.lanes));
      for (const index of await this.db(() => log.queuedLanes(this.id))) this.lanes[index]!.mode = 'queue';
      await this.reading.markCatchUp();
      // One loop failing stops the others; the deliverer starts the worker afresh.
      const loops = [this.reading.loop(), this.flushLoop(), ...this.lanes.map((lane) => this.laneLoop(lane))].map((loop) =>
        loop.catch((error: unknown) => {
          if (error instanceof Stopped) return;
          this.failed = true;
          this.controller.abort();
          this.logger.error({ err: toError(error) }, 'webhook destination worker failed; restarting it');
        }),
      );
      await Promise.all(loops);
    } catch (error) {
      if (!(error instanceof Stopped)) {
        this.failed = true;
        this.logger.error({ err: toError(error) }, 'webhook destination worker failed; restarting it');
      }
    } finally {
      // Best effort: whatever is not saved here is delivered again after the restart.
      await this.options.store.saveProgress(this.id, this.cursor().toString(), this.delivered, this.failedAttempts).catch(() => undefined);
    }
  }

  // ── what the reading hands over ─────────────────────────────────────────

  private pending(): number {
    let n = this.parking.size;
    for (const lane of this.lanes) n += lane.memory.length;
    return n;
  }

  private dispatch(event: LoggedEvent): void {
    const lane = this.lanes[laneOf(event.recordId, this.lanes.length)]!;
    const item = itemOfEvent(event);
    if (lane.mode === 'memory') {
      lane.memory.push(item);
      lane.wakeup.notify();
    } else {
      this.parking.park(lane, item, { status: 'pending' });
    }
  }

  // ── parking and the cursor ──────────────────────────────────────────────

  /** Every subscribed event up to here is delivered, exhausted or parked. */
  private cursor(): bigint {
    let oldest: bigint | undefined;
    const consider = (seq: bigint) => {
      if (oldest === undefined || seq < oldest) oldest = seq;
    };
    for (const lane of this.lanes) if (lane.memory[0]) consider(lane.memory[0].seq);
    const parked = this.parking.oldestSeq();
    if (parked !== undefined) consider(parked);
    const cursor = oldest === undefined ? this.reading.seq : oldest - 1n;
    return cursor > this.savedCursor ? cursor : this.savedCursor;
  }

  private async flushLoop(): Promise<void> {
    while (!this.signal.aborted) {
      await this.flushWakeup.wait(this.options.tuning.flushMs);
      if (this.signal.aborted) return;
      await this.flush();
    }
  }

  private async flush(): Promise<void> {
    if (!this.parking.isEmpty) {
      const batch = this.parking.take();
      await this.db(() => this.options.log.park(this.id, batch.rows));
      this.parking.wrote(batch);
      this.roomFreed.notify();
    }
    const cursor = this.cursor();
    const delivered = this.delivered;
    const failed = this.failedAttempts;
    if (cursor !== this.savedCursor || delivered > 0 || failed > 0) {
      await this.db(() => this.options.store.saveProgress(this.id, cursor.toString(), delivered, failed));
      this.savedCursor = cursor;
      this.delivered -= delivered;
      this.failedAttempts -= failed;
    }
    this.progressSaved.notify();
  }

  // ── lanes ───────────────────────────────────────────────────────────────

  private async laneLoop(lane: Lane): Promise<void> {
    const { schedule, tuning } = this.options;
    while (!this.signal.aborted) {
      if (lane.mode === 'queue') {
        await this.workQueue(lane);
        continue;
      }
      if (lane.queueRequested) {
        this.toQueue(lane);
        continue;
      }
      const head = lane.memory[0];
      if (!head) {
        await lane.wakeup.wait(tuning.idleMs);
        continue;
      }
      const outcome = await this.attempt(head);
      if (this.signal.aborted) return;
      if (outcome.ok) {
        lane.memory.shift();
        lane.failingSince = undefined;
        this.delivered += 1;
        this.roomFreed.notify();
        this.wakeups.answered(this.lanes.some((lane) => lane.failingSince !== undefined));
        continue;
      }
      this.failedAttempts += 1;
      lane.failingSince ??= outcome.at.getTime();
      if (isExhausted(schedule, 1, lane.failingSince)) {
        lane.memory.shift();
        this.parking.park(lane, head, { status: 'exhausted', outcome });
        this.logExhausted(head.eventKey, 1, outcome);
        continue;
      }
      const next = new Date(Date.now() + retryDelay(schedule, 1, this.options.random));
      this.logger.debug({ eventId: head.eventKey, error: outcome.error }, 'webhook delivery failed; queued for retry');
      this.toQueue(lane, { outcome, next });
    }
  }

  /** Parks the lane's memory (the head possibly as a failed first attempt) and works from the queue. */
  private toQueue(lane: Lane, failedHead?: { outcome: AttemptOutcome; next: Date }): void {
    const items = lane.memory;
    lane.memory = [];
    for (const [i, item] of items.entries()) {
      this.parking.park(lane, item, i === 0 && failedHead ? { status: 'retrying', ...failedHead } : { status: 'pending' });
    }
    lane.mode = 'queue';
    lane.queueRequested = false;
    this.roomFreed.notify();
  }

  private async workQueue(lane: Lane): Promise<void> {
    const { tuning, log } = this.options;
    if (!this.reading.isCaughtUp) {
      // After a restart, events re-read from the log may belong before rows already queued.
      await this.reading.caughtUpWakeup.wait(tuning.idleMs);
      return;
    }
    if (this.parking.hasUnwritten(lane)) {
      // Rows of this lane are still on their way to the table: load nothing before them.
      this.flushWakeup.notify();
      await this.parking.written.wait(tuning.idleMs);
      return;
    }
    const parkedBefore = lane.lastParkNo;
    const rows = await this.db(() => log.queued(this.id, lane.index, tuning.queuePage));
    if (rows.length === 0) {
      // Nothing queued, and nothing parked while we looked: back to working from memory.
      if (lane.lastParkNo === parkedBefore) lane.mode = 'memory';
      return;
    }
    for (const row of rows) {
      await this.deliverQueued(lane, row);
      if (this.signal.aborted) return;
    }
  }

  private async deliverQueued(lane: Lane, row: QueuedDelivery): Promise<void> {
    const { schedule, log } = this.options;
    let attempts = row.attempts;
    let firstAttemptAt = row.firstAttemptAt;
    let nextAt = row.nextAttemptAt?.getTime() ?? 0;
    const item = itemOfRow(row);
    while (!this.signal.aborted) {
      const wait = nextAt - Date.now();
      if (wait > 0) {
        const seen = this.wakeups.answeredAgain;
        const asked = this.wakeups.retryRequests;
        await this.wakeups.notifier.wait(wait);
        // The destination answers again: try now rather than at the end of a back-off that may be an hour.
        if (this.wakeups.answeredAgain !== seen) nextAt = 0;
        // A replay was asked for: the row may have been moved to now.
        else if (this.wakeups.retryRequests !== asked) nextAt = (await this.db(() => log.nextAttemptAt(row.id)))?.getTime() ?? 0;
        continue;
      }
      const outcome = await this.attempt(item);
      if (this.signal.aborted) return;
      attempts += 1;
      if (outcome.ok) {
        await this.db(() => log.delivered(row.id, attempts, outcome));
        lane.failingSince = undefined;
        this.delivered += 1;
        this.wakeups.answered(this.lanes.some((lane) => lane.failingSince !== undefined));
        return;
      }
      this.failedAttempts += 1;
      firstAttemptAt ??= outcome.at;
      lane.failingSince ??= (row.attempts > 0 && row.firstAttemptAt ? row.firstAttemptAt : outcome.at).getTime();
      if (isExhausted(schedule, attempts, lane.failingSince)) {
        const first = firstAttemptAt;
        // The destination's counters first: whoever sees the delivery exhausted sees its attempts counted.
        // (A flush already under way may have read the counters before this attempt: then one more.)
        for (let round = 0; round < 2 && this.failedAttempts > 0 && !this.signal.aborted; round++) {
          const saved = this.progressSaved.wait(this.options.tuning.flushMs * 5 + 1000);
          this.flushWakeup.notify();
          await saved;
        }
        await this.db(() => log.failed(row.id, attempts, outcome, first, null));
        this.logExhausted(row.eventKey, attempts, outcome);
        return;
      }
      const next = new Date(Date.now() + retryDelay(schedule, attempts, this.options.random));
      const first = firstAttemptAt;
      await this.db(() => log.failed(row.id, attempts, outcome, first, next));
      nextAt = next.getTime();
    }
  }

  // ── one attempt ─────────────────────────────────────────────────────────

  private async attempt(item: Item): Promise<AttemptOutcome & { ok: boolean }> {
    const { destination, sender } = this.options;
    const at = new Date();
    const headers = this.sign(item.eventKey, item.value, at.getTime());
    const result = await sender.send(destination.url, headers, item.value, this.signal);
    return { ok: result.ok, statusCode: result.status, error: result.error, at };
  }

  private logExhausted(eventKey: string, attempts: number, outcome: AttemptOutcome): void {
    this.logger.warn(
      { eventId: eventKey, attempts, status: outcome.statusCode, error: outcome.error },
      'webhook delivery exhausted; it stays in the delivery log and can be replayed',
    );
  }

  /** Bookkeeping in the control database, retried until it succeeds or the worker stops. */
  private async db<T>(work: () => Promise<T>): Promise<T> {
    if (this.signal.aborted) throw new Stopped();
    try {
      return await retry(work, {
        backoff: BOOKKEEPING_BACKOFF,
        signal: this.signal,
        onRetry: (error) => this.logger.warn({ err: toError(error) }, 'webhook bookkeeping failed; retrying'),
      });
    } catch (error) {
      if (this.signal.aborted) throw new Stopped();
      throw error;
    }
  }
}
