import { setMaxListeners } from 'node:events';
import type { Secret } from '../../control/secrets.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import type { EventLogReader, LoggedEvent } from '../log.ts';
import type { AttemptOutcome, DeliveryLog, NewDelivery, QueuedDelivery } from './deliveries.ts';
import type { WebhookStore } from './destinations.ts';
import { laneOf } from './lanes.ts';
import { isExhausted, retryDelay, type RetrySchedule } from './schedule.ts';
import type { Sender } from './send.ts';
import { webhookSigner, type WebhookSigner } from './signature.ts';
import { type Backoff, retry } from '../../retry.ts';
import { Notifier, sleep, Stopped } from './wait.ts';

/** Bookkeeping in the control database: 200 ms doubling to 10 s, until it succeeds or the worker stops. */
const BOOKKEEPING_BACKOFF: Backoff = { initialMs: 200, maxMs: 10_000 };

/** How often a destination answering again may cut short the back-off of its waiting lanes. */
const ANSWERED_AGAIN_GAP_MS = 5_000;

/** Knobs of the deliverer; the defaults suit production. */
export interface DelivererTuning {
  /**
   * Serial lanes per destination: the most requests in flight to one destination. A lane's
   * throughput is one event per round trip, so a destination gets at most lanes / round trip:
   * 128 lanes carry 2,000 events/s while round trips stay under 64 ms.
   */
  lanes: number;
  /** Events held in memory per destination (read ahead, or waiting to be parked). */
  maxPending: number;
  /** How often parked events and the cursor are written. */
  flushMs: number;
  /** The longest a loop sleeps without a wakeup before it looks again. */
  idleMs: number;
  /** Events read from the log at once. */
  readBatch: number;
  /** Queued rows a lane loads at once. */
  queuePage: number;
}

export const DEFAULT_TUNING: DelivererTuning = {
  lanes: 128,
  maxPending: 10_000,
  flushMs: 100,
  idleMs: 5_000,
  readBatch: 1_000,
  queuePage: 100,
};

const SKIP_AHEAD_MS = 1_000;

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

/** An event read from the log, waiting in a lane's memory. */
interface Item {
  seq: bigint;
  topic: string;
  recordId: string;
  eventKey: string;
  createdAt: Date;
  value: string;
}

/**
 * A lane delivers one event at a time. In `memory` mode it works from events read from
 * the log, writing nothing for an event delivered at its first attempt. When its head
 * fails, the head (retrying) and everything behind it (pending) are parked in
 * webhook_deliveries and the lane switches to `queue` mode: it works the queued rows in
 * log order (new events for it are parked too) until none are left, then goes back to
 * memory mode. Other lanes are not held up, and memory stays bounded however long a
 * destination fails.
 */
interface Lane {
  index: number;
  mode: 'memory' | 'queue';
  memory: Item[];
  /** The number of the last park() that included an event of this lane. */
  lastParkNo: number;
  /** Replayed rows are waiting: switch to queue mode after the current attempt. */
  queueRequested: boolean;
  /** When the lane's current run of failures began (ms), undefined after a success. */
  failingSince: number | undefined;
  wakeup: Notifier;
}

interface Parked {
  lane: Lane;
  seq: bigint;
  row: NewDelivery;
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
  private readSeq: bigint;
  private savedCursor: bigint;
  /** Events whose rows are not written yet, and those being written. */
  private parkBuffer: Parked[] = [];
  private parkInFlight: Parked[] = [];
  private parkNo = 0;
  private flushedNo = 0;
  private delivered = 0;
  private failedAttempts = 0;
  /** After a restart, queued lanes wait until the log has been re-read up to here. */
  private catchUpSeq = 0n;
  private caughtUp = false;
  private readonly flushWakeup = new Notifier();
  private readonly flushed = new Notifier();
  private readonly roomFreed = new Notifier();
  private readonly caughtUpWakeup = new Notifier();
  /** Notified at the end of each flush: the counters it found are saved. */
  private readonly progressSaved = new Notifier();
  /** Notified when the destination answers 2xx while other lanes wait out a back-off. */
  private readonly answering = new Notifier();
  private answeredAgain = 0;
  /** Replays asked for: a waiting delivery reads its row again (it may have been moved to now). */
  private retryRequests = 0;
  private lastAnsweredAgainAt = 0;
  private running: Promise<void> | undefined;
  private skippedAt = 0;
  private failed = false;
  private readonly sign: WebhookSigner;
  private readonly topics: Set<string>;

  constructor(private readonly options: DestinationWorkerOptions) {
    this.logger = options.logger.child({ destination: options.destination.id });
    // Every lane waits on this signal.
    setMaxListeners(0, this.signal);
    this.readSeq = BigInt(options.destination.cursorSeq);
    this.savedCursor = this.readSeq;
    this.lanes = Array.from({ length: options.tuning.lanes }, (_, index) => ({
      index,
      mode: 'memory' as const,
      memory: [],
      lastParkNo: 0,
      queueRequested: false,
      failingSince: undefined,
      wakeup: new Notifier(),
    }));
    this.sign = webhookSigner(options.destination.secret);
    this.topics = new Set(options.destination.topics);
    // Stopping wakes every loop: one abort listener here, not one per wait.
    const notifiers = [this.flushWakeup, this.flushed, this.roomFreed, this.caughtUpWakeup, this.answering, this.progressSaved, ...this.lanes.map((lane) => lane.wakeup)];
    this.signal.addEventListener('abort', () => notifiers.forEach((n) => n.close()), { once: true });
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
    this.retryRequests += 1;
    this.answering.notify();
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
    const { log, reader, syncId, tuning } = this.options;
    try {
      await this.db(() => log.relane(this.id, tuning.lanes));
      for (const index of await this.db(() => log.queuedLanes(this.id))) this.lanes[index]!.mode = 'queue';
      this.catchUpSeq = BigInt(await this.db(() => reader.lastSeq(syncId)));
      this.caughtUp = this.readSeq >= this.catchUpSeq;
      // One loop failing stops the others; the deliverer starts the worker afresh.
      const loops = [this.readLoop(), this.flushLoop(), ...this.lanes.map((lane) => this.laneLoop(lane))].map((loop) =>
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
      await this.options.store
        .saveProgress(this.id, this.cursor().toString(), this.delivered, this.failedAttempts)
        .catch(() => undefined);
    }
  }

  // ── reading the log ─────────────────────────────────────────────────────

  private pending(): number {
    let n = this.parkBuffer.length + this.parkInFlight.length;
    for (const lane of this.lanes) n += lane.memory.length;
    return n;
  }

  private async readLoop(): Promise<void> {
    const { bus, syncId, tuning } = this.options;
    // What the decoder in this process commits arrives here without a read of the log.
    const feed = bus.subscribeLogged(syncId, tuning.maxPending);
    // After a wait that timed out, the log is read whatever the feed says (a safety net).
    let readLog = true;
    try {
      while (!this.signal.aborted) {
        const mark = bus.mark(syncId);
        const room = tuning.maxPending - this.pending();
        if (room <= 0) {
          await this.roomFreed.wait(tuning.idleMs);
          continue;
        }
        const limit = Math.min(room, tuning.readBatch);
        const fed = readLog ? undefined : feed.take(this.readSeq, limit);
        const full = fed === undefined ? await this.readLog(limit) : fed !== 'caught-up' && this.readFed(fed, limit);
        readLog = false;
        if (!this.caughtUp && this.readSeq >= this.catchUpSeq) {
          this.caughtUp = true;
          this.caughtUpWakeup.notify();
        }
        if (full) continue;
        const started = Date.now();
        const changed = await bus.changedSince(syncId, mark, tuning.idleMs, this.signal);
        readLog = !changed;
        // A stopped bus answers at once; do not spin on it.
        if (!changed) await sleep(tuning.idleMs - (Date.now() - started), this.signal);
      }
    } finally {
      feed.close();
    }
  }

  /** Events handed over by this process's decoder (every topic, in seq order); true if there may be more. */
  private readFed(events: LoggedEvent[], limit: number): boolean {
    for (const event of events) if (this.topics.has(event.topic)) this.dispatch(event);
    this.readSeq = BigInt(events[events.length - 1]!.seq);
    return events.length === limit;
  }

  /** The destination's next events from the log; true if the read was full (there may be more). */
  private async readLog(limit: number): Promise<boolean> {
    const { reader, syncId, destination } = this.options;
    // Everything up to `last` is visible to the read below (the decoder logs events and
    // its progress in one transaction), so the read position may skip past events of
    // topics this destination does not take. Looked up about once a second, not per read.
    const skip = Date.now() - this.skippedAt >= SKIP_AHEAD_MS;
    const last = skip ? BigInt(await this.db(() => reader.lastSeq(syncId))) : 0n;
    if (skip) this.skippedAt = Date.now();
    const events = await this.db(() => reader.bySeq(syncId, this.readSeq.toString(), { topics: destination.topics, limit }));
    for (const event of events) this.dispatch(event);
    const lastRead = events.length > 0 ? BigInt(events[events.length - 1]!.seq) : this.readSeq;
    const full = events.length === limit;
    this.readSeq = full ? lastRead : [this.readSeq, lastRead, last].reduce((a, b) => (a > b ? a : b));
    return full;
  }

  private dispatch(event: LoggedEvent): void {
    const lane = this.lanes[laneOf(event.recordId, this.lanes.length)]!;
    const item: Item = {
      seq: BigInt(event.seq),
      topic: event.topic,
      recordId: event.recordId,
      eventKey: event.eventKey,
      createdAt: event.createdAt,
      value: event.value,
    };
    if (lane.mode === 'memory') {
      lane.memory.push(item);
      lane.wakeup.notify();
    } else {
      this.park(lane, item, { status: 'pending' });
    }
  }

  // ── parking and the cursor ──────────────────────────────────────────────

  private park(lane: Lane, item: Item, state: { status: NewDelivery['status']; outcome?: AttemptOutcome; next?: Date }): void {
    const { outcome } = state;
    this.parkNo += 1;
    lane.lastParkNo = this.parkNo;
    this.parkBuffer.push({
      lane,
      seq: item.seq,
      row: {
        seq: item.seq.toString(),
        lane: lane.index,
        topic: item.topic,
        recordId: item.recordId,
        eventKey: item.eventKey,
        eventCreatedAt: item.createdAt,
        value: item.value,
        status: state.status,
        attempts: outcome ? 1 : 0,
        lastStatusCode: outcome?.statusCode ?? null,
        lastError: outcome?.error ?? null,
        firstAttemptAt: outcome?.at ?? null,
        lastAttemptAt: outcome?.at ?? null,
        nextAttemptAt: state.next ?? null,
      },
    });
    if (this.parkBuffer.length >= 500) this.flushWakeup.notify();
  }

  /** Every subscribed event up to here is delivered, exhausted or parked. */
  private cursor(): bigint {
    let oldest: bigint | undefined;
    const consider = (seq: bigint) => {
      if (oldest === undefined || seq < oldest) oldest = seq;
    };
    for (const lane of this.lanes) if (lane.memory[0]) consider(lane.memory[0].seq);
    for (const parked of this.parkBuffer) consider(parked.seq);
    for (const parked of this.parkInFlight) consider(parked.seq);
    const cursor = oldest === undefined ? this.readSeq : oldest - 1n;
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
    if (this.parkBuffer.length > 0) {
      const batch = this.parkBuffer;
      const upTo = this.parkNo;
      this.parkBuffer = [];
      this.parkInFlight = batch;
      await this.db(() => this.options.log.park(this.id, batch.map((parked) => parked.row)));
      // Written: these events no longer hold the cursor back.
      this.parkInFlight = [];
      this.flushedNo = upTo;
      this.flushed.notify();
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
        this.destinationAnswered();
        continue;
      }
      this.failedAttempts += 1;
      lane.failingSince ??= outcome.at.getTime();
      if (isExhausted(schedule, 1, lane.failingSince)) {
        lane.memory.shift();
        this.park(lane, head, { status: 'exhausted', outcome });
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
    items.forEach((item, i) =>
      this.park(lane, item, i === 0 && failedHead ? { status: 'retrying', ...failedHead } : { status: 'pending' }),
    );
    lane.mode = 'queue';
    lane.queueRequested = false;
    this.roomFreed.notify();
  }

  private async workQueue(lane: Lane): Promise<void> {
    const { tuning, log } = this.options;
    if (!this.caughtUp) {
      // After a restart, events re-read from the log may belong before rows already queued.
      await this.caughtUpWakeup.wait(tuning.idleMs);
      return;
    }
    if (lane.lastParkNo > this.flushedNo) {
      // Rows of this lane are still on their way to the table: load nothing before them.
      this.flushWakeup.notify();
      await this.flushed.wait(tuning.idleMs);
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
    const item: Item = {
      seq: BigInt(row.seq),
      topic: row.topic,
      recordId: row.recordId,
      eventKey: row.eventKey,
      createdAt: row.eventCreatedAt,
      value: row.value,
    };
    while (!this.signal.aborted) {
      const wait = nextAt - Date.now();
      if (wait > 0) {
        const seen = this.answeredAgain;
        const asked = this.retryRequests;
        await this.answering.wait(wait);
        // The destination answers again: try now rather than at the end of a back-off that may be an hour.
        if (this.answeredAgain !== seen) nextAt = 0;
        else if (this.retryRequests !== asked) nextAt = (await this.db(() => log.nextAttemptAt(row.id)))?.getTime() ?? 0;
        continue;
      }
      const outcome = await this.attempt(item);
      if (this.signal.aborted) return;
      attempts += 1;
      if (outcome.ok) {
        await this.db(() => log.delivered(row.id, attempts, outcome));
        lane.failingSince = undefined;
        this.delivered += 1;
        this.destinationAnswered();
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

  /**
   * A 2xx from the destination: lanes waiting out a back-off try again now. At most once per
   * ANSWERED_AGAIN_GAP_MS, so a flapping destination is not sent every waiting lane per success.
   */
  private destinationAnswered(): void {
    if (!this.lanes.some((lane) => lane.failingSince !== undefined)) return;
    const now = Date.now();
    if (now - this.lastAnsweredAgainAt < ANSWERED_AGAIN_GAP_MS) return;
    this.lastAnsweredAgainAt = now;
    this.answeredAgain += 1;
    this.answering.notify();
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
