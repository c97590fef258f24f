import type { DeliveryLog } from './deliveries.ts';
import type { WebhookStore } from './destinations.ts';
import type { Lane } from './lanes.ts';
import type { Parking } from './parking.ts';
import { Notifier } from './wait.ts';

export interface ProgressOptions {
  id: string;
  /** The cursor generation the worker started with (see WebhookStore.saveProgress). */
  generation: string;
  store: WebhookStore;
  log: DeliveryLog;
  lanes: Lane[];
  parking: Parking;
  /** How far the worker has read: every event up to here has been handed to a lane, or passed over. */
  readSeq: () => bigint;
  /** Since when every attempt has failed, saved with the cursor. */
  failingSince: () => Date | null;
  /** Notified when parked events are written (room in memory). */
  roomFreed: Notifier;
  /** Flushes early: enough parked, or a lane waiting for its rows to be written. */
  wakeup: Notifier;
  flushMs: number;
  db: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * A destination worker's durable progress: parked events written in batches, then the
 * cursor (just before the oldest event neither delivered nor written) and the counters,
 * one statement per flush whatever the number of events.
 */
export class WorkerProgress {
  /** Counted since the last flush. */
  delivered = 0;
  failedAttempts = 0;
  /** Notified at the end of each flush: the counters it found are saved. */
  readonly saved = new Notifier();
  private savedCursor: bigint;

  constructor(
    private readonly options: ProgressOptions,
    cursorSeq: bigint,
  ) {
    this.savedCursor = cursorSeq;
  }

  /** Every subscribed event up to here is delivered, exhausted or parked. */
  cursor(): bigint {
    let oldest: bigint | undefined;
    const consider = (seq: bigint) => {
      if (oldest === undefined || seq < oldest) oldest = seq;
    };
    for (const lane of this.options.lanes) if (lane.memory[0]) consider(lane.memory[0].seq);
    const parked = this.options.parking.oldestSeq();
    if (parked !== undefined) consider(parked);
    const cursor = oldest === undefined ? this.options.readSeq() : oldest - 1n;
    return cursor > this.savedCursor ? cursor : this.savedCursor;
  }

  /** Flushes every flushMs, or sooner when woken, until `signal` aborts. */
  async loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.options.wakeup.wait(this.options.flushMs);
      if (signal.aborted) return;
      await this.flush();
    }
  }

  async flush(): Promise<void> {
    const { parking, db, log, store, id, generation } = this.options;
    if (!parking.isEmpty) {
      const batch = parking.take();
      await db(() => log.park(id, batch.rows, generation));
      parking.wrote(batch);
      this.options.roomFreed.notify();
    }
    const cursor = this.cursor();
    const delivered = this.delivered;
    const failed = this.failedAttempts;
    if (cursor !== this.savedCursor || delivered > 0 || failed > 0) {
      await db(() => store.saveProgress(this.row(cursor, delivered, failed)));
      this.savedCursor = cursor;
      this.delivered -= delivered;
      this.failedAttempts -= failed;
    }
    this.saved.notify();
  }

  /** At the stop, best effort: whatever is not saved here is delivered again after the restart. */
  async last(): Promise<void> {
    await this.options.store.saveProgress(this.row(this.cursor(), this.delivered, this.failedAttempts)).catch(() => undefined);
  }

  private row(cursor: bigint, delivered: number, failedAttempts: number) {
    const { id, generation } = this.options;
    return { id, generation, cursorSeq: cursor.toString(), delivered, failedAttempts, failingSince: this.options.failingSince() };
  }
}
