import type { LoggedEvent } from '../log.ts';
import type { QueuedDelivery } from './deliveries.ts';
import { Notifier } from './wait.ts';

export { LANE_SQL, laneOf } from '../lane-hash.ts';

/** An event read from the log, waiting in a lane's memory. */
export interface Item {
  seq: bigint;
  topic: string;
  recordId: string;
  eventKey: string;
  createdAt: Date;
  value: string;
}

export function itemOfEvent(event: LoggedEvent): Item {
  return {
    seq: BigInt(event.seq),
    topic: event.topic,
    recordId: event.recordId,
    eventKey: event.eventKey,
    createdAt: event.createdAt,
    value: event.value,
  };
}

export function itemOfRow(row: QueuedDelivery): Item {
  return {
    seq: BigInt(row.seq),
    topic: row.topic,
    recordId: row.recordId,
    eventKey: row.eventKey,
    createdAt: row.eventCreatedAt,
    value: row.value,
  };
}

/**
 * A lane delivers one event at a time. In `memory` mode it takes the events the destination's
 * reader hands it, writing nothing for an event delivered at its first attempt. When its head
 * fails, the head is written to webhook_deliveries (retrying) together with the lane's row in
 * webhook_lanes, and the lane falls behind (`queue` mode): it works its queued rows (the
 * retrying head, replays) in log order, then reads its own events from the log after
 * `afterSeq`, until it reaches the reader and goes back to memory mode. Other lanes are not held
 * up, events behind a failing head are not copied anywhere (they wait in the log), and memory
 * stays bounded however long a destination fails.
 */
export interface Lane {
  index: number;
  mode: 'memory' | 'queue';
  memory: Item[];
  /** Queue mode: every event of the lane up to here is delivered, or has a row in webhook_deliveries. */
  afterSeq: bigint;
  /**
   * The lane's row in webhook_lanes: none; `behind` (queue mode reads the log from its
   * after_seq); `released` (caught up; the row goes once the destination's cursor passes it).
   */
  row: 'none' | 'behind' | 'released';
  /** afterSeq or the row's state changed since the last flush wrote them. */
  moved: boolean;
  /** The number of the last park() that included an event of this lane. */
  lastParkNo: number;
  /** Replayed rows are waiting: switch to queue mode after the current attempt. */
  queueRequested: boolean;
  /** When the lane's current run of failures began (ms), undefined after a success. */
  failingSince: number | undefined;
  /** The head's next attempt is not before this (ms), as its Retry-After asked; 0 when none. */
  notBefore: number;
  /**
   * The destination's answered-again count when the lane's last attempt began: a 2xx from
   * another lane after that (even while this attempt was still in flight) ends its back-off.
   */
  answersSeen: number;
  /** The replay-request count when the lane last read its queue. */
  retriesSeen: number;
  wakeup: Notifier;
}

export function newLane(index: number): Lane {
  return {
    index,
    mode: 'memory',
    memory: [],
    afterSeq: 0n,
    row: 'none',
    moved: false,
    lastParkNo: 0,
    queueRequested: false,
    failingSince: undefined,
    notBefore: 0,
    answersSeen: 0,
    retriesSeen: 0,
    wakeup: new Notifier(),
  };
}

/** The lane falls behind at `afterSeq`: it reads its own events from the log from there on. */
export function putBehind(lane: Lane, afterSeq: bigint): void {
  lane.mode = 'queue';
  lane.afterSeq = afterSeq;
  lane.row = 'behind';
  lane.memory = [];
}
