import crypto from 'node:crypto';
import type { LoggedEvent } from '../log.ts';
import type { QueuedDelivery } from './deliveries.ts';
import { Notifier } from './wait.ts';

/**
 * Per-record order: every event of a record goes through the same lane, and a lane
 * delivers one event at a time, in log order. The lane of a record is the first 32 bits
 * of md5(record id) modulo the lane count, computed the same way in SQL (LANE_SQL) so
 * that queued rows can be moved when the lane count changes.
 */
export function laneOf(recordId: string, lanes: number): number {
  return md5(recordId).readUInt32BE(0) % lanes;
}

// The one-shot crypto.hash (Node 20.12 and later) costs less than a Hash object per event.
const md5: (text: string) => Buffer =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('md5', text, 'buffer') : (text) => crypto.createHash('md5').update(text, 'utf8').digest();

/** The same as laneOf, as an SQL expression over a text column and an int parameter. */
export const LANE_SQL = (column: string, lanes: string) => `((('x' || substr(md5(${column}), 1, 8))::bit(32)::bigint % ${lanes}::int)::int)`;

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
 * A lane delivers one event at a time. In `memory` mode it works from events read from
 * the log, writing nothing for an event delivered at its first attempt. When its head
 * fails, the head (retrying) and everything behind it (pending) are parked in
 * webhook_deliveries and the lane switches to `queue` mode: it works the queued rows in
 * log order (new events for it are parked too) until none are left, then goes back to
 * memory mode. Other lanes are not held up, and memory stays bounded however long a
 * destination fails.
 */
export interface Lane {
  index: number;
  mode: 'memory' | 'queue';
  memory: Item[];
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
    lastParkNo: 0,
    queueRequested: false,
    failingSince: undefined,
    notBefore: 0,
    answersSeen: 0,
    retriesSeen: 0,
    wakeup: new Notifier(),
  };
}
