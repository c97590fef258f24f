import type { DeliveryLog } from './deliveries.ts';
import type { WebhookStore } from './destinations.ts';
import type { LaneCursor, LaneCursors } from './lane-cursors.ts';
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
  cursors: LaneCursors;
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
 * A destination worker's durable progress: parked events written in batches, where the lanes
 * that fell behind got to, then the cursor (just before the oldest event of a lane in memory
 * mode neither delivered nor written) and the counters: a statement each per flush, whatever
 * the number of events.
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
    // Before the cursor: the cursor may pass events that only a lane's row accounts for.
    await this.saveLanes();
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

  /**
   * Lanes whose position or state changed; and released rows the saved cursor has passed,
   * which go. The cursor used is the one saved already, never the one about to be.
   */
  private async saveLanes(): Promise<void> {
    const { lanes, db, cursors, id, generation } = this.options;
    const moved: Array<LaneCursor & { of: Lane }> = [];
    let passed = false;
    for (const lane of lanes) {
      if (lane.row === 'none') continue;
      if (lane.moved) moved.push({ lane: lane.index, laneCount: lanes.length, afterSeq: lane.afterSeq, released: lane.row === 'released', of: lane });
      else if (lane.row === 'released' && lane.afterSeq <= this.savedCursor) passed = true;
    }
    if (moved.length === 0 && !passed) return;
    for (const m of moved) m.of.moved = false;
    const gone = await db(() => cursors.save(id, generation, moved, this.savedCursor));
    for (const m of moved) {
      // Changed again while being saved: saved at the next flush.
      if (m.of.afterSeq !== m.afterSeq || (m.of.row === 'released') !== m.released) m.of.moved = true;
    }
    for (const index of gone) {
      const lane = lanes[index];
      if (lane && lane.row === 'released' && lane.mode === 'memory' && !lane.moved) lane.row = 'none';
    }
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
