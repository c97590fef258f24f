import { setMaxListeners } from 'node:events';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import type { EventLogReader, LoggedEvent } from '../log.ts';
import { forDestination } from './filter.ts';
import { Attempter, type AttemptResult } from './attempts.ts';
import { bookkeeping } from './bookkeeping.ts';
import type { AttemptOutcome, DeliveryLog } from './deliveries.ts';
import type { DestinationControls } from './destination-controls.ts';
import type { WebhookStore } from './destinations.ts';
import type { DestinationSettings, WorkerDestination } from './destination-settings.ts';
import { compileFilter, type EventMatcher } from './filter.ts';
import { type Item, itemOfEvent, type Lane, laneOf, newLane, putBehind } from './lanes.ts';
import { deliveryRow, type ParkState, Parking } from './parking.ts';
import { WorkerProgress } from './progress.ts';
import { ReadAhead } from './read-ahead.ts';
import { isExhausted, retryAfterFloor, retryDelay, type RetrySchedule } from './schedule.ts';
import type { Sender } from './send.ts';
import type { DelivererTuning } from './tuning.ts';
import { Notifier, Stopped } from './wait.ts';
import { BackoffWakeups } from './backoff-wakeups.ts';
import { type LaneCursors, startLanes } from './lane-cursors.ts';
import { answered, deliverBehind, deliverQueued, type LaneHost } from './lane-deliveries.ts';
import type { AttemptBounds } from './shared-bounds.ts';

export interface DestinationWorkerOptions {
  syncId: string;
  destination: WorkerDestination;
  store: WebhookStore;
  controls: DestinationControls;
  log: DeliveryLog;
  /** Where the destination's lanes that fell behind got to. */
  cursors: LaneCursors;
  reader: EventLogReader;
  bus: EventBus;
  sender: Sender;
  schedule: RetrySchedule;
  tuning: DelivererTuning;
  logger: Logger;
  /** Bounds shared with the process's other webhooks (SharedBounds). */
  shared?: AttemptBounds;
  /** The most events this worker may hold in memory now: its part of its account's (SharedBounds). */
  held?: () => number;
  random?: () => number;
}

/**
 * Delivers one destination's events. Order of durability: an event delivered in memory
 * mode is final at its 2xx; a parked event counts as accounted for once its row is
 * written. The cursor is saved (every flushMs) only up to just before the oldest event
 * that is neither, so a crash re-delivers from there: at-least-once, same webhook-id.
 */
export class DestinationWorker implements LaneHost {
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  private readonly lanes: Lane[];
  private readonly logger: Logger;
  private readonly reading: ReadAhead;
  readonly progress: WorkerProgress;
  readonly flushWakeup = new Notifier();
  private readonly parking = new Parking(this.flushWakeup);
  private readonly roomFreed = new Notifier();
  /** Ends back-offs early: the destination answering again, or replays asked for. */
  readonly wakeups = new BackoffWakeups();
  private running: Promise<void> | undefined;
  private readonly attempter: Attempter;
  private matches: EventMatcher | undefined;
  private disabling: Promise<void> | undefined;

  constructor(readonly options: DestinationWorkerOptions) {
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
        maxPending: () => Math.min(tuning.maxPending, options.held?.() ?? Number.POSITIVE_INFINITY),
        roomFreed: this.roomFreed,
        dispatch: (event) => this.dispatch(event),
        db: (work) => this.db(work),
      },
      BigInt(destination.cursorSeq),
    );
    this.lanes = Array.from({ length: tuning.lanes }, (_, index) => newLane(index));
    this.attempter = new Attempter({
      ...destination,
      sender: options.sender,
      disableAfterMs: tuning.disableAfterMs,
      ...(options.shared ? { shared: options.shared } : {}),
    });
    this.progress = new WorkerProgress(
      {
        id: destination.id,
        generation: destination.cursorGeneration,
        store: options.store,
        log: options.log,
        lanes: this.lanes,
        parking: this.parking,
        cursors: options.cursors,
        readSeq: () => this.reading.seq,
        failingSince: () => this.attempter.failingSince,
        roomFreed: this.roomFreed,
        wakeup: this.flushWakeup,
        flushMs: tuning.flushMs,
        db: (work) => this.db(work),
      },
      this.reading.seq,
    );
    this.matches = compileFilter(destination.filter);
    // Stopping wakes every loop: one abort listener here, not one per wait.
    const notifiers = [
      this.flushWakeup,
      this.parking.written,
      this.roomFreed,
      this.wakeups.notifier,
      this.progress.saved,
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

  /** True once the worker has stopped, or is stopping: asked to, after an unexpected error, or having disabled its destination. */
  get hasStopped(): boolean {
    return this.signal.aborted;
  }

  get id(): string {
    return this.options.destination.id;
  }

  start(): void {
    this.running ??= this.run();
  }

  /**
   * A changed filter applies to the events read from now on (those already read passed the
   * one before); a new secret or rate to the next attempt.
   */
  update(settings: DestinationSettings): void {
    this.matches = compileFilter(settings.filter);
    this.attempter.maxPerSecond = settings.maxPerSecond;
    this.attempter.signing = settings.signing;
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
      await startLanes(this.lanes, { id: this.id, ...this.options, db: (work) => this.db(work) });
      // One loop failing stops the others; the deliverer starts the worker afresh.
      const loops = [this.reading.loop(), this.progress.loop(this.signal), ...this.lanes.map((lane) => this.laneLoop(lane))].map((loop) =>
        loop.catch((error: unknown) => {
          if (error instanceof Stopped) return;
          this.controller.abort();
          this.logger.error({ err: toError(error) }, 'webhook destination worker failed; restarting it');
        }),
      );
      await Promise.all(loops);
    } catch (error) {
      if (!(error instanceof Stopped)) {
        this.controller.abort();
        this.logger.error({ err: toError(error) }, 'webhook destination worker failed; restarting it');
      }
    } finally {
      await this.progress.last();
    }
  }

  // ── what the reading hands over ─────────────────────────────────────────

  private pending(): number {
    let n = this.parking.size;
    for (const lane of this.lanes) n += lane.memory.length;
    return n;
  }

  private dispatch(event: LoggedEvent): void {
    // Not the destination's: neither sent nor parked, so it holds nothing back.
    if (this.matches && !this.matches(event.value)) return;
    const lane = this.lanes[laneOf(event.recordId, this.lanes.length)]!;
    // A lane that fell behind reads its own events from the log when it gets there.
    if (lane.mode === 'queue') return;
    lane.memory.push(itemOfEvent(event));
    lane.wakeup.notify();
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
        await this.fallBehind(lane);
        continue;
      }
      const head = lane.memory[0];
      if (!head) {
        await lane.wakeup.wait(tuning.idleMs);
        continue;
      }
      const outcome = await this.attempt(lane, head);
      if (this.signal.aborted) return;
      if (outcome.ok) {
        lane.memory.shift();
        answered(this, lane);
        this.roomFreed.notify();
        continue;
      }
      lane.failingSince ??= outcome.at.getTime();
      if (isExhausted(schedule, 1, lane.failingSince)) {
        lane.memory.shift();
        this.parking.park(lane, head, { status: 'exhausted', outcome });
        this.logExhausted(head.eventKey, 1, outcome);
        continue;
      }
      const next = new Date(Date.now() + this.retryWait(lane, 1, outcome));
      this.logger.debug({ eventId: head.eventKey, error: outcome.error }, 'webhook delivery failed; queued for retry');
      await this.fallBehind(lane, { status: 'retrying', outcome, next });
    }
  }

  /**
   * The lane falls behind: its failed head (if any) is written as a retrying row, together with
   * the lane's row saying how far it got; what its memory held is read again from the log later.
   */
  private async fallBehind(lane: Lane, failedHead?: ParkState): Promise<void> {
    const { log, tuning } = this.options;
    // Exhausted rows of the lane parked in memory mode are written first: they come before.
    await this.parkedWritten(lane);
    const head = lane.memory[0];
    const afterSeq = failedHead && head ? head.seq : head ? head.seq - 1n : this.reading.seq;
    const rows = failedHead && head ? [deliveryRow(lane, head, failedHead)] : [];
    lane.queueRequested = false;
    await this.db(() =>
      log.park(this.id, rows, this.options.destination.cursorGeneration, { lane: lane.index, lanes: tuning.lanes, afterSeq: afterSeq.toString() }),
    );
    // Whatever the reader handed the lane meanwhile comes after afterSeq: read again from the log.
    putBehind(lane, afterSeq);
    // A flush under way may be saving this lane as released: the next one says behind.
    lane.moved = true;
    this.roomFreed.notify();
  }

  private async workQueue(lane: Lane): Promise<void> {
    const { tuning, log } = this.options;
    // Rows of this lane still on their way to the table come before anything loaded now.
    await this.parkedWritten(lane);
    if (this.signal.aborted) return;
    lane.retriesSeen = this.wakeups.retryRequests;
    const rows = await this.db(() => log.queued(this.id, lane.index, tuning.queuePage));
    if (rows.length > 0) {
      for (const row of rows) {
        await deliverQueued(this, lane, row);
        if (this.signal.aborted) return;
      }
      return;
    }
    await this.readBehind(lane);
  }

  /** Until the lane's parked rows are written (flushed sooner for it), or the worker stops. */
  private async parkedWritten(lane: Lane): Promise<void> {
    while (this.parking.hasUnwritten(lane) && !this.signal.aborted) {
      this.flushWakeup.notify();
      await this.parking.written.wait(this.options.tuning.idleMs);
    }
  }

  /** Nothing queued: the lane's own events from the log, up to where the reader has got. */
  private async readBehind(lane: Lane): Promise<void> {
    const { tuning, reader, syncId, destination } = this.options;
    const upTo = this.reading.seq;
    if (lane.afterSeq >= upTo) {
      // Caught up with the reader: what it reads from here on comes to the lane's memory.
      lane.mode = 'memory';
      if (lane.row === 'behind') lane.row = 'released';
      lane.moved = true;
      return;
    }
    const range = { afterSeq: lane.afterSeq.toString(), upToSeq: upTo.toString() };
    const events = await this.db(() =>
      reader.ofLane(syncId, range, { topics: destination.topics, lane: lane.index, lanes: tuning.lanes, limit: tuning.queuePage }),
    );
    for (const event of events) {
      if (forDestination(event, this.id) && (!this.matches || this.matches(event.value))) {
        const movedOn = await deliverBehind(this, lane, itemOfEvent(event));
        if (!movedOn || this.signal.aborted) return;
      }
      lane.afterSeq = BigInt(event.seq);
      lane.moved = true;
    }
    if (events.length < tuning.queuePage) {
      lane.afterSeq = upTo;
      lane.moved = true;
    }
  }

  // ── one attempt ─────────────────────────────────────────────────────────

  /**
   * One attempt, counted. A destination that asks to be sent nothing more (410), or that has
   * failed for days, is disabled here: the worker stops, the event stays unsent (before the
   * cursor), and re-enabling sends it again.
   */
  async attempt(lane: Lane, item: Item): Promise<AttemptResult> {
    // A 2xx from here on, even one that comes while this attempt is still failing, ends its back-off.
    lane.answersSeen = this.wakeups.answeredAgain;
    const result = await this.attempter.attempt(item, this.signal);
    if (this.signal.aborted) return result;
    if (!result.ok) this.progress.failedAttempts += 1;
    if (result.disable) await (this.disabling ??= this.disable(result.disable, result));
    return result;
  }

  private async disable(reason: string, result: AttemptResult): Promise<void> {
    this.logger.warn(
      { reason, status: result.statusCode, error: result.error },
      'webhook destination disabled; nothing is sent to it until it is enabled again',
    );
    await this.db(() => this.options.controls.disable(this.options.syncId, this.id, reason)).catch(() => undefined);
    // Its deliverer stops it too, on the wakeup; stopping here sends nothing more meanwhile.
    this.controller.abort();
  }

  /** The back-off after a failed attempt: no shorter than a 429's or 503's Retry-After, which the destination answering elsewhere does not cut short. */
  retryWait(lane: Lane, failures: number, outcome: AttemptResult): number {
    const floor = retryAfterFloor(this.options.schedule, outcome.statusCode, outcome.retryAfterMs);
    lane.notBefore = floor > 0 ? Date.now() + floor : 0;
    return Math.max(retryDelay(this.options.schedule, failures, this.options.random), floor);
  }

  logExhausted(eventKey: string, attempts: number, outcome: AttemptOutcome): void {
    this.logger.warn(
      { eventId: eventKey, attempts, status: outcome.statusCode, error: outcome.error },
      'webhook delivery exhausted; it stays in the delivery log and can be replayed',
    );
  }

  /** Bookkeeping in the control database, retried until it succeeds or the worker stops. */
  db<T>(work: () => Promise<T>): Promise<T> {
    return bookkeeping(work, this.signal, this.logger);
  }
}
