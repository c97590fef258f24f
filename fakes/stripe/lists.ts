/**
 * Stripe's list pagination: newest first, `limit` 1–100 (default 10), `starting_after` /
 * `ending_before` cursors, `created` ranges. Scans the ascending entry array from the cursor's
 * position (binary search), so a page costs O(log n + page) when filters match densely.
 */
import { invalidRequest, noSuch } from './errors.ts';
import type { Params, Value } from './params.ts';
import { compareEntries, type Entry, type StripeObject } from './store.ts';

export interface ListPage<T = StripeObject> {
  object: 'list';
  data: T[];
  has_more: boolean;
  url: string;
}

export interface Range {
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
}

/** `created=N` or `created[gt]=N…` as an inclusive [min, max] in seconds. */
export function rangeOf(v: Value | undefined): { min: number; max: number } {
  let min = Number.NEGATIVE_INFINITY;
  let max = Number.POSITIVE_INFINITY;
  if (typeof v === 'number') return { min: v, max: v };
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const r = v as Range;
    if (typeof r.gt === 'number') min = Math.max(min, r.gt + 1);
    if (typeof r.gte === 'number') min = Math.max(min, r.gte);
    if (typeof r.lt === 'number') max = Math.min(max, r.lt - 1);
    if (typeof r.lte === 'number') max = Math.min(max, r.lte);
  }
  return { min, max };
}

export function inRange(value: unknown, v: Value | undefined): boolean {
  if (v === undefined) return true;
  if (typeof value !== 'number') return false;
  const { min, max } = rangeOf(v);
  return value >= min && value <= max;
}

export function limitOf(params: Params): number {
  const limit = params.limit;
  if (limit === undefined) return 10;
  if (typeof limit !== 'number' || limit < 1 || limit > 100) {
    throw invalidRequest('Invalid limit: must be between 1 and 100', { param: 'limit' });
  }
  return limit;
}

/** First index whose entry sorts after `key` (upper bound). */
function upperBound(order: Entry[], key: Entry): number {
  let lo = 0;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareEntries(order[mid] as Entry, key) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose created is ≥ t. */
function firstAtOrAfter(order: Entry[], t: number): number {
  let lo = 0;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((order[mid] as Entry).created < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export interface PageOptions {
  params: Params;
  url: string;
  /** Resolves a cursor id; undefined answers 404 for the cursor. */
  cursor: (id: string) => Entry | undefined;
  /** The noun for "No such …" when a cursor is unknown. */
  noun: string;
  filter?: (obj: StripeObject) => boolean;
  /** Entries older than this (seconds) are gone (events' retention). */
  notBefore?: number;
}

/** One page of `order` (ascending entries, tombstones included). */
export function page(order: Entry[], opts: PageOptions): ListPage {
  const { params } = opts;
  const limit = limitOf(params);
  let { min, max } = rangeOf(params.created);
  if (opts.notBefore !== undefined) min = Math.max(min, opts.notBefore);
  const keep = (e: Entry) => !e.deleted && e.created >= min && e.created <= max && (!opts.filter || opts.filter(e.obj));
  const after = typeof params.starting_after === 'string' ? params.starting_after : undefined;
  const before = typeof params.ending_before === 'string' ? params.ending_before : undefined;
  if (after !== undefined && before !== undefined) {
    throw invalidRequest('You may only specify one of these parameters: ending_before, starting_after.', { param: 'ending_before' });
  }
  const found: Entry[] = [];
  // A cursor past retention is gone like any unknown id (Stripe: "No such event").
  const expired = (e: Entry) => opts.notBefore !== undefined && e.created < opts.notBefore;
  if (before !== undefined) {
    const cursor = opts.cursor(before);
    if (!cursor || expired(cursor)) throw noSuch(opts.noun, before, 'ending_before');
    const end = Number.isFinite(max) ? firstAtOrAfter(order, max + 1) : order.length;
    for (let i = upperBound(order, cursor); i < end && found.length <= limit; i++) {
      const e = order[i] as Entry;
      if (keep(e)) found.push(e);
    }
    const hasMore = found.length > limit;
    const data = found.slice(0, limit).reverse();
    return { object: 'list', data: data.map((e) => e.obj), has_more: hasMore, url: opts.url };
  }
  let start = Number.isFinite(max) ? firstAtOrAfter(order, max + 1) - 1 : order.length - 1;
  if (after !== undefined) {
    const cursor = opts.cursor(after);
    if (!cursor || expired(cursor)) throw noSuch(opts.noun, after, 'starting_after');
    start = Math.min(start, upperBound(order, cursor) - 2);
  }
  for (let i = start; i >= 0 && found.length <= limit; i--) {
    const e = order[i] as Entry;
    if (e.created < min) break;
    if (keep(e)) found.push(e);
  }
  const hasMore = found.length > limit;
  return { object: 'list', data: found.slice(0, limit).map((e) => e.obj), has_more: hasMore, url: opts.url };
}

/** A page over an in-memory array already newest first (invoice lines, embedded lists). */
export function pageOfArray<T extends { id: string }>(items: T[], params: Params, url: string, noun: string): ListPage<T> {
  const limit = limitOf(params);
  const after = typeof params.starting_after === 'string' ? params.starting_after : undefined;
  const before = typeof params.ending_before === 'string' ? params.ending_before : undefined;
  if (before !== undefined) {
    const at = items.findIndex((x) => x.id === before);
    if (at === -1) throw noSuch(noun, before, 'ending_before');
    const from = Math.max(0, at - limit);
    return { object: 'list', data: items.slice(from, at), has_more: from > 0, url };
  }
  let from = 0;
  if (after !== undefined) {
    const at = items.findIndex((x) => x.id === after);
    if (at === -1) throw noSuch(noun, after, 'starting_after');
    from = at + 1;
  }
  return { object: 'list', data: items.slice(from, from + limit), has_more: from + limit < items.length, url };
}
