import type { EventBus } from '../bus.ts';
import type { EventLogReader, LoggedEvent } from '../log.ts';
import { forDestination } from './filter.ts';
import type { DelivererTuning } from './tuning.ts';
import { type Notifier, sleep } from './wait.ts';

const SKIP_AHEAD_MS = 1_000;

export interface ReadAheadOptions {
  syncId: string;
  /** The destination: a backfill's reads meant for another one are skipped. */
  destinationId: string;
  /** The destination's topics. */
  topics: string[];
  reader: EventLogReader;
  bus: EventBus;
  tuning: DelivererTuning;
  signal: AbortSignal;
  /** Events held in memory now: no more than maxPending() are read. */
  pending: () => number;
  /** The most events the worker may hold now: tuning.maxPending, or less, its part of its account's. */
  maxPending: () => number;
  /** Notified when events held in memory leave it. */
  roomFreed: Notifier;
  /** Takes each of the destination's events, in log order. */
  dispatch: (event: LoggedEvent) => void;
  /** Bookkeeping in the control database, retried until it succeeds or the worker stops. */
  db: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * Reads a destination's events, from this process's decoder (the bus feed) or from the
 * log, as far ahead as the memory bound allows, and hands them to its worker.
 */
export class ReadAhead {
  private readSeq: bigint;
  private skippedAt = 0;
  private readonly topics: Set<string>;

  constructor(
    private readonly options: ReadAheadOptions,
    cursorSeq: bigint,
  ) {
    this.readSeq = cursorSeq;
    this.topics = new Set(options.topics);
  }

  /** Every event up to here has been handed over (or is not of the destination's topics). */
  get seq(): bigint {
    return this.readSeq;
  }

  async loop(): Promise<void> {
    const { bus, syncId, tuning, signal } = this.options;
    // What the decoder in this process commits arrives here without a read of the log.
    const feed = bus.subscribeLogged(syncId, this.options.maxPending);
    // After a wait that timed out, the log is read whatever the feed says (a safety net).
    let readLog = true;
    try {
      while (!signal.aborted) {
        const mark = bus.mark(syncId);
        const room = this.options.maxPending() - this.options.pending();
        if (room <= 0) {
          await this.options.roomFreed.wait(tuning.idleMs);
          continue;
        }
        const limit = Math.min(room, tuning.readBatch);
        const fed = readLog ? undefined : feed.take(this.readSeq, limit);
        const full = fed === undefined ? await this.readLog(limit) : fed !== 'caught-up' && this.readFed(fed, limit);
        readLog = false;
        if (full) continue;
        const started = Date.now();
        const changed = await bus.changedSince(syncId, mark, tuning.idleMs, signal);
        readLog = !changed;
        // A stopped bus answers at once; do not spin on it.
        if (!changed) await sleep(tuning.idleMs - (Date.now() - started), signal);
      }
    } finally {
      feed.close();
    }
  }

  /** Events handed over by this process's decoder (every topic, in seq order); true if there may be more. */
  private readFed(events: LoggedEvent[], limit: number): boolean {
    for (const event of events) if (this.topics.has(event.topic) && forDestination(event, this.options.destinationId)) this.options.dispatch(event);
    this.readSeq = BigInt(events[events.length - 1]!.seq);
    return events.length === limit;
  }

  /** The destination's next events from the log; true if the read was full (there may be more). */
  private async readLog(limit: number): Promise<boolean> {
    const { db, reader, syncId, topics } = this.options;
    // Everything up to `last` is visible to the read below (the decoder logs events and
    // its progress in one transaction), so the read position may skip past events of
    // topics this destination does not take. Looked up about once a second, not per read.
    const skip = Date.now() - this.skippedAt >= SKIP_AHEAD_MS;
    const last = skip ? BigInt(await db(() => reader.lastSeq(syncId))) : 0n;
    if (skip) this.skippedAt = Date.now();
    const events = await db(() => reader.bySeq(syncId, this.readSeq.toString(), { topics, limit }));
    for (const event of events) if (forDestination(event, this.options.destinationId)) this.options.dispatch(event);
    const lastRead = events.length > 0 ? BigInt(events[events.length - 1]!.seq) : this.readSeq;
    const full = events.length === limit;
    this.readSeq = full ? lastRead : [this.readSeq, lastRead, last].reduce((a, b) => (a > b ? a : b));
    return full;
  }
}
