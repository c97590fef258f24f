import type { LoggedEvent } from './log.ts';

/**
 * One in-process reader's copy of the events this process's decoder has just committed to
 * the log for one sync (EventBus.subscribeLogged). It spares the reader a read of the log
 * per batch: at thousands of events a second those reads were most of the control
 * database's work, and of the time between a commit and a delivery.
 *
 * The log stays the truth. The feed only answers when it can be sure: events in seq order
 * starting right after the reader's position, or "caught up" when the reader has passed the
 * last batch published since the decoder (re)started. Otherwise (the reader is behind the
 * feed, the feed dropped batches, or nothing was published yet) the reader reads the log.
 */
export class LoggedFeed {
  private batches: LoggedEvent[][] = [];
  /** Events in `batches`. */
  private held = 0;
  /** The last seq published since the feed began or was reset; undefined: not known. */
  private lastSeq: bigint | undefined;
  private closed = false;

  constructor(
    /** Events held at most (now); past it the oldest batches go (the reader then reads the log). */
    private readonly maxEvents: number | (() => number),
    private readonly onClose: (feed: LoggedFeed) => void,
  ) {}

  /** A batch the decoder committed, in commit order (seqs consecutive within it). */
  push(events: LoggedEvent[]): void {
    if (this.closed || events.length === 0) return;
    // Not right after the last batch (a write whose commit failed ambiguously, then a restart):
    // what is held no longer leads up to this batch without a gap.
    if (this.lastSeq !== undefined && BigInt(events[0]!.seq) !== this.lastSeq + 1n) this.reset();
    this.batches.push(events);
    this.held += events.length;
    this.lastSeq = BigInt(events[events.length - 1]!.seq);
    const max = typeof this.maxEvents === 'number' ? this.maxEvents : this.maxEvents();
    while (this.held > max && this.batches.length > 1) this.held -= this.batches.shift()!.length;
  }

  /** The decoder restarted: what it logs next may not follow the last batch seen here. */
  reset(): void {
    this.batches = [];
    this.held = 0;
    this.lastSeq = undefined;
  }

  /**
   * At most `limit` events right after `afterSeq`, in seq order; 'caught-up' when there is
   * nothing after `afterSeq` in the log as far as this process's decoder knows; undefined
   * when only the log can say.
   */
  take(afterSeq: bigint, limit: number): LoggedEvent[] | 'caught-up' | undefined {
    // What the reader already has goes.
    while (this.batches.length > 0) {
      const batch = this.batches[0]!;
      if (BigInt(batch[batch.length - 1]!.seq) > afterSeq) break;
      this.batches.shift();
      this.held -= batch.length;
    }
    const batch = this.batches[0];
    if (!batch) return this.lastSeq !== undefined && afterSeq >= this.lastSeq ? 'caught-up' : undefined;
    const start = Number(afterSeq - BigInt(batch[0]!.seq)) + 1;
    // The reader is behind the first event held: the events between are only in the log.
    if (start < 0) return undefined;
    const out: LoggedEvent[] = [];
    for (let b = 0, from = start; b < this.batches.length && out.length < limit; b++, from = 0) {
      const events = this.batches[b]!;
      for (let i = from; i < events.length && out.length < limit; i++) out.push(events[i]!);
    }
    return out;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.reset();
    this.onClose(this);
  }
}
