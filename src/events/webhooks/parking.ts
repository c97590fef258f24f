import type { AttemptOutcome, NewDelivery } from './deliveries.ts';
import type { Item, Lane } from './lanes.ts';
import { Notifier } from './wait.ts';

/** How an event is parked: waiting its turn, or after a failed first attempt. */
export interface ParkState {
  status: NewDelivery['status'];
  outcome?: AttemptOutcome;
  next?: Date;
}

interface Parked {
  lane: Lane;
  seq: bigint;
  row: NewDelivery;
}

/** A batch of parked rows taken for writing. */
export interface ParkBatch {
  rows: NewDelivery[];
  upTo: number;
}

/** The delivery-log row of an event of `lane`, as parked. */
export function deliveryRow(lane: Lane, item: Item, state: ParkState): NewDelivery {
  const { outcome } = state;
  return {
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
  };
}

/**
 * A destination's events on their way into webhook_deliveries, written in batches by its
 * worker's flush. Until its batch is written, a parked event holds the cursor back, and its
 * lane loads nothing from the queue.
 */
export class Parking {
  /** Events whose rows are not written yet, and those being written. */
  private buffer: Parked[] = [];
  private inFlight: Parked[] = [];
  private parkNo = 0;
  private writtenNo = 0;
  /** Notified when a batch is written. */
  readonly written = new Notifier();

  /** `full` is notified when enough rows wait to be worth writing before the next flush. */
  constructor(private readonly full: Notifier) {}

  /** Parked events not written yet. */
  get size(): number {
    return this.buffer.length + this.inFlight.length;
  }

  get isEmpty(): boolean {
    return this.buffer.length === 0;
  }

  park(lane: Lane, item: Item, state: ParkState): void {
    this.parkNo += 1;
    lane.lastParkNo = this.parkNo;
    this.buffer.push({ lane, seq: item.seq, row: deliveryRow(lane, item, state) });
    if (this.buffer.length >= 500) this.full.notify();
  }

  /** Rows of this lane are still on their way to the table. */
  hasUnwritten(lane: Lane): boolean {
    return lane.lastParkNo > this.writtenNo;
  }

  /** The oldest event parked and not written yet. */
  oldestSeq(): bigint | undefined {
    let oldest: bigint | undefined;
    for (const parked of this.buffer) if (oldest === undefined || parked.seq < oldest) oldest = parked.seq;
    for (const parked of this.inFlight) if (oldest === undefined || parked.seq < oldest) oldest = parked.seq;
    return oldest;
  }

  /** Takes what is parked so far for writing; it holds the cursor back until `wrote`. */
  take(): ParkBatch {
    const batch = this.buffer;
    this.buffer = [];
    this.inFlight = batch;
    return { rows: batch.map((parked) => parked.row), upTo: this.parkNo };
  }

  wrote(batch: ParkBatch): void {
    // Written: these events no longer hold the cursor back.
    this.inFlight = [];
    this.writtenNo = batch.upTo;
    this.written.notify();
  }
}
