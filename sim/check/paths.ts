import type { Violation } from '../types.ts';
import type { DeliveredEvent } from './events.ts';

interface Keyed {
  key: string;
  record: string;
}

function keyed(events: DeliveredEvent[]): Keyed[] {
  return events.map((e) => {
    const value = JSON.parse(e.value) as { table_db_name: string; id: string };
    return { key: e.key, record: `${value.table_db_name}/${value.id}` };
  });
}

/**
 * Another delivery path (Kafka, webhooks) against the REST log, which the fold proved equal
 * to the database: every event of the log's `topics` is delivered (nothing lost), nothing
 * else is, a key always carries the same event, and each record's events come in the log's
 * order. Redeliveries (at-least-once) are allowed. With `since` (ms), only the log's events
 * made from then on are owed (a webhook destination gets the events logged after it was made).
 */
/**
 * The REST log as a webhook gets it: a gap marker is in every partition of its topic, and a
 * webhook takes only its first partition's copy (docs/events.md#gaps-a-lost-replication-slot).
 */
export const asWebhooksGetIt = (log: DeliveredEvent[]): DeliveredEvent[] => log.filter((e) => !e.value.includes('"event":"gap"') || /\/0@\d+$/.test(e.where));

/** Whether an event was logged at `since` (ms) or later: what a destination made at `since` is owed. */
export const loggedSince = (e: DeliveredEvent, since: number) => Date.parse((JSON.parse(e.value) as { created_at: string }).created_at) >= since;

export function samePath(path: string, log: DeliveredEvent[], delivered: DeliveredEvent[], options: { since?: number } = {}): Violation[] {
  const violations: Violation[] = [];
  const fail = (detail: string) => {
    if (violations.length < 20) violations.push({ check: `events (${path})`, detail });
  };
  const values = new Map(log.map((e) => [e.key, e.value]));
  const seen = new Set<string>();
  for (const event of delivered) {
    const value = values.get(event.key);
    if (value === undefined) fail(`${event.where}: key ${event.key} is not in the event log`);
    else if (value !== event.value) fail(`${event.where}: key ${event.key} carries another event than the log's`);
    seen.add(event.key);
  }
  const since = options.since;
  const expected = since === undefined ? log : log.filter((e) => loggedSince(e, since));
  const lost = expected.filter((e) => !seen.has(e.key));
  if (lost.length > 0) fail(`${lost.length} events of the log never delivered, e.g. ${lost[0]!.where} (${lost[0]!.key})`);
  // Per record, the first delivery of each key in the log's order.
  const order = new Map<string, number>(log.map((e, i) => [e.key, i]));
  const last = new Map<string, number>();
  const firstSeen = new Set<string>();
  for (const event of keyed(delivered.filter((e) => values.has(e.key)))) {
    if (firstSeen.has(event.key)) continue;
    firstSeen.add(event.key);
    const at = order.get(event.key)!;
    const before = last.get(event.record);
    if (before !== undefined && before > at) fail(`${event.record}: event ${event.key} delivered after a later one`);
    last.set(event.record, Math.max(before ?? -1, at));
  }
  return violations;
}
