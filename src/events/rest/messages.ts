import type { LoggedEvent } from '../log.ts';

/** A message as Upstash's REST API gives it; offset, partition and timestamp are numbers. */
export interface RestMessage {
  topic: string;
  partition: number;
  offset: number;
  /** When the change committed, in milliseconds since the epoch. */
  timestamp: number;
  /** The event's idempotency key: a field on REST, a header on Kafka. */
  key: string;
  /** The event JSON, as a string. */
  value: string;
  headers: Array<{ key: string; value: string }>;
}

export const EVENT_ID_HEADER = 'svc-event-id';
export const RECORD_ID_HEADER = 'svc-record-id';

export function toMessage(event: LoggedEvent): RestMessage {
  return {
    topic: event.topic,
    partition: event.partition,
    offset: Number(event.offset),
    timestamp: event.createdAt.getTime(),
    key: event.eventKey,
    value: event.value,
    headers: [
      { key: EVENT_ID_HEADER, value: event.eventKey },
      { key: RECORD_ID_HEADER, value: event.recordId },
    ],
  };
}

/**
 * Bounds one answer by message count and (softly) by size. Events are taken as a prefix
 * of each partition's offset order, so whatever is left out comes next time, in order.
 */
export class ResponseBudget {
  private count = 0;
  private bytes = 0;

  constructor(private readonly limits: { maxMessages: number; maxResponseBytes: number }) {}

  get remaining(): number {
    return this.bytes >= this.limits.maxResponseBytes ? 0 : Math.max(0, this.limits.maxMessages - this.count);
  }

  /** The prefix of `events` that fits; the first message of an answer always fits. */
  take(events: LoggedEvent[]): LoggedEvent[] {
    const taken: LoggedEvent[] = [];
    for (const event of events) {
      const size = event.value.length + event.eventKey.length * 2 + event.recordId.length + event.topic.length + 160;
      if (this.count > 0 && (this.count >= this.limits.maxMessages || this.bytes + size > this.limits.maxResponseBytes)) {
        this.bytes = this.limits.maxResponseBytes; // full: stop reading other partitions too
        break;
      }
      this.count += 1;
      this.bytes += size;
      taken.push(event);
    }
    return taken;
  }
}
