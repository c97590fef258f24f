import { listOf, type Options, UsageError, type Values } from './command.ts';

/**
 * The command-line forms of a webhook's filter, rate and times (docs/events.md, Filters),
 * turned into the API's JSON. Mistakes here are usage errors (exit 2): the API never sees them.
 */

export const EVENT_KINDS = ['inserted', 'updated', 'deleted', 'read'] as const;

type Scalar = string | number | boolean | null;
type Condition = Scalar | { in: Scalar[] } | { not_null: true };

export interface Filter {
  events?: string[];
  changed?: string[];
  where?: Record<string, Condition>;
}

export const filterOptions: Options = {
  'filter-events': { type: 'string' },
  changed: { type: 'string', multiple: true },
  where: { type: 'string', multiple: true },
  'where-in': { type: 'string', multiple: true },
};

export const filterHelp = `
  --filter-events K,K    only events of these kinds: inserted, updated, deleted, read
  --changed COLUMN       an updated event only when it changed this column (repeat for more;
                         any one of them will do); other kinds pass
  --where COLUMN=VALUE   only when the row's column equals VALUE (repeat: all must hold).
                         VALUE is read as JSON when it is JSON (5, true, null, "5"), else as
                         the text itself: --where status=active, --where points=5
  --where COLUMN!=null   only when the column is not null
  --where-in COLUMN=A,B  only when it equals one of the comma-separated values (each read as
                         above); a JSON list for values with commas: --where-in 'c=["a,b","c"]'`;

/** A value as typed: JSON when it parses (numbers, booleans, null, quoted text), else the text. */
export function scalarOf(text: string): Scalar {
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return value as Scalar;
  } catch {
    // Not JSON: the text itself.
  }
  return text;
}

function splitColumn(arg: string, option: string): [string, string] {
  const at = arg.indexOf('=');
  if (at <= 0) throw new UsageError(`--${option} takes COLUMN=VALUE (got ${JSON.stringify(arg)})`);
  return [arg.slice(0, at), arg.slice(at + 1)];
}

function inValues(text: string): Scalar[] {
  if (text.startsWith('[')) {
    try {
      const list: unknown = JSON.parse(text);
      if (Array.isArray(list)) return list.map((v) => (typeof v === 'object' && v !== null ? JSON.stringify(v) : v) as Scalar);
    } catch {
      // Not a JSON list: read as comma-separated below.
    }
  }
  return text.split(',').map(scalarOf);
}

/** The filter the options describe, or undefined when none of them is given. */
export function filterFrom(values: Values): Filter | undefined {
  const filter: Filter = {};
  if (typeof values['filter-events'] === 'string') {
    const kinds = values['filter-events']
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean);
    const unknown = kinds.find((k) => !(EVENT_KINDS as readonly string[]).includes(k));
    if (unknown !== undefined || kinds.length === 0) {
      throw new UsageError(`--filter-events takes kinds from ${EVENT_KINDS.join(', ')}, comma-separated${unknown ? ` (not ${unknown})` : ''}`);
    }
    filter.events = kinds;
  }
  const changed = listOf(values.changed);
  if (changed.length > 0) filter.changed = changed;
  const where: Record<string, Condition> = {};
  const put = (column: string, condition: Condition) => {
    if (column in where) throw new UsageError(`--where names ${column} twice: one condition a column`);
    where[column] = condition;
  };
  for (const arg of listOf(values.where)) {
    // "col!=null" is the only negation the API has: not null.
    if (arg.endsWith('!=null') && !arg.slice(0, -6).includes('=')) {
      if (arg.length === 6) throw new UsageError('--where COLUMN!=null needs the column');
      put(arg.slice(0, -6), { not_null: true });
    } else {
      const [column, value] = splitColumn(arg, 'where');
      put(column, scalarOf(value));
    }
  }
  for (const arg of listOf(values['where-in'])) {
    const [column, value] = splitColumn(arg, 'where-in');
    put(column, { in: inValues(value) });
  }
  if (Object.keys(where).length > 0) filter.where = where;
  return Object.keys(filter).length > 0 ? filter : undefined;
}

/** A rate for --max-per-second: a whole number (the API checks its range and says it). */
export function rateOf(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n)) throw new UsageError('--max-per-second takes a whole number of attempts per second');
  return n;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** "90s", "30m", "24h", "7d" in seconds; undefined when the text is not that form. */
export function secondsOf(text: string): number | undefined {
  const match = /^(\d+)([smhd])$/.exec(text.trim());
  return match ? Number(match[1]) * UNITS[match[2]!]! : undefined;
}

/** --keep-previous: a duration (24h), or bare seconds (0 drops the old secret now). */
export function keepPreviousOf(text: string): number {
  const seconds = /^\d+$/.test(text) ? Number(text) : secondsOf(text);
  if (seconds === undefined) throw new UsageError('--keep-previous takes a duration such as 24h, 30m or 7d, or seconds (0: drop the old secret now)');
  return seconds;
}

/** --since: a time ago (2h, 30m, 1d) made absolute, or an ISO time, which the API checks. */
export function sinceOf(text: string, now = Date.now()): string {
  const seconds = secondsOf(text);
  return seconds === undefined ? text : new Date(now - seconds * 1000).toISOString();
}
