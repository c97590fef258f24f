import { isFor, type LoggedEvent } from '../log.ts';

/**
 * A destination's filter: which of its topics' events it is sent. Checked where the worker
 * takes each event from the log (destination-worker.ts dispatch), so that an event that does
 * not match is neither sent nor parked, and does not hold the cursor back.
 */

export const EVENT_KINDS = ['inserted', 'updated', 'deleted', 'read'] as const;
/** A gap marker (docs/events.md#gaps-a-lost-replication-slot): every filter passes it, since it says what a consumer holds is stale. */
const GAP = 'gap';

/**
 * Whether a destination takes an event of its topics: not a read meant for another one, and
 * of a gap marker only its first partition's copy (a webhook has no partitions to meet it in).
 */
export const forDestination = (event: LoggedEvent, destinationId: string): boolean =>
  isFor(event, destinationId) && (event.partition <= 0 || eventKindOf(event.value) !== GAP);
export type EventKind = (typeof EVENT_KINDS)[number];

export type Scalar = string | number | boolean | null;
/** A plain scalar means equals. */
export type Condition = Scalar | { eq: Scalar } | { in: Scalar[] } | { not_null: true };

export interface WebhookFilter {
  /** Only events of these kinds. */
  events?: EventKind[];
  /** An `updated` event only when its `changes` names one of these columns; other kinds pass. */
  changed?: string[];
  /** Conditions on the event's `data` columns, all of which must hold. */
  where?: Record<string, Condition>;
}

/** Whether an event (its JSON, as logged) is to be sent. */
export type EventMatcher = (value: string) => boolean;

/** The columns a filter names, for the API's check against the topics' collections. */
export function filterColumns(filter: WebhookFilter): string[] {
  return [...new Set([...(filter.changed ?? []), ...Object.keys(filter.where ?? {})])];
}

/** A matcher for the filter, or undefined when every event passes. */
export function compileFilter(filter: WebhookFilter | null | undefined): EventMatcher | undefined {
  if (!filter) return undefined;
  const kinds = filter.events ? new Set<string>(filter.events) : undefined;
  const changed = filter.changed;
  const where = filter.where ? Object.entries(filter.where).map(([column, condition]) => ({ column, test: conditionTest(condition) })) : [];
  if (!kinds && !changed && where.length === 0) return undefined;
  if (!changed && where.length === 0) {
    // Kinds alone: the event's kind is read without parsing the event.
    return (value) => {
      const kind = eventKindOf(value) ?? '';
      return kind === GAP || kinds!.has(kind);
    };
  }
  return (value) => {
    let event: { event?: unknown; data?: unknown; changes?: unknown };
    try {
      event = JSON.parse(value) as typeof event;
    } catch {
      // The log holds only JSON the decoder wrote; anything else is not ours to judge, so it goes.
      return true;
    }
    if (event.event === GAP) return true;
    if (kinds && !kinds.has(String(event.event))) return false;
    if (changed && event.event === 'updated') {
      const changes = isObject(event.changes) ? event.changes : {};
      if (!changed.some((column) => Object.hasOwn(changes, column))) return false;
    }
    if (where.length > 0) {
      const data = isObject(event.data) ? event.data : {};
      // A column the row does not have counts as null.
      for (const { column, test } of where) if (!test(Object.hasOwn(data, column) ? data[column] : null)) return false;
    }
    return true;
  };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Values compare as JSON scalars: the string "1" is not the number 1, and no object or array equals a scalar. */
function conditionTest(condition: Condition): (value: unknown) => boolean {
  if (condition === null || typeof condition !== 'object') return (value) => value === condition;
  if ('eq' in condition) return (value) => value === condition.eq;
  if ('in' in condition) {
    const values = new Set<unknown>(condition.in);
    return (value) => (value === null || typeof value !== 'object') && values.has(value);
  }
  return (value) => value !== null && value !== undefined;
}

const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const KIND_KEY = '"event":"';

/**
 * The event's kind, read from its JSON without parsing it. Usually `"event":"` occurs once
 * and is the event's own key; a column named `event` in `data` or `changes` makes it occur
 * more than once, and then the JSON is walked to the key at the top level.
 */
export function eventKindOf(value: string): string | undefined {
  const first = value.indexOf(KIND_KEY);
  if (first < 0) return undefined;
  const at = first === value.lastIndexOf(KIND_KEY) ? first : topLevelKey(value, KIND_KEY);
  if (at === undefined) return undefined;
  const start = at + KIND_KEY.length;
  const end = value.indexOf('"', start);
  return end < 0 ? undefined : value.slice(start, end);
}

/** Where `needle` (a quoted key and what follows it) starts at the top level of a JSON object. */
function topLevelKey(json: string, needle: string): number | undefined {
  let depth = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === QUOTE) {
      if (depth === 1 && json.startsWith(needle, i)) return i;
      // Past the string: its characters are not structure.
      for (i++; i < json.length && json.charCodeAt(i) !== QUOTE; i++) if (json.charCodeAt(i) === BACKSLASH) i++;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return undefined;
}
