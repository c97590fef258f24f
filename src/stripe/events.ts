import type pg from 'pg';
import { STRIPE_SCHEMAS } from './migrations.ts';
import { STRIPE_API_VERSION, tableForObject } from './catalog.ts';
import { type StripeClient, StripeError, type StripeObject } from './client.ts';
import { inTransaction } from '../db/sql.ts';
import { saveState } from '../sync/state.ts';
import { stateKeys } from './scope.ts';
import { type ApplyResult, applyChanges, type Change } from './store.ts';
import { numberedCustomers } from './sequence.ts';
import { markUpcoming } from './upcoming.ts';
import { uneventedOf } from './unevented.ts';
import type { LateEvents } from './late-events.ts';

export const EVENTS_KEY = stateKeys(null).events;

/** Where the feed was read up to: the newest event applied, or (none yet) a time to start from. */
export interface EventsCursor {
  id: string | null;
  created: number;
}

export interface StripeEvent {
  id: string;
  type: string;
  created: number;
  api_version?: string | null;
  data: { object: StripeObject; previous_attributes?: Record<string, unknown> };
}

/** Stripe keeps events 30 days; a cursor close to that age may fall off before it is read. */
const RETENTION_S = 30 * 24 * 3600;
const RETENTION_MARGIN_S = 3600;

/** The feed no longer reaches back to the cursor: only a new backfill can catch up. */
export class CursorExpired extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CursorExpired';
  }
}

/**
 * `*.deleted` removes the row, except a subscription's: Stripe sends
 * `customer.subscription.deleted` when it is canceled, and the object stays (status canceled).
 */
export function changeOf(event: StripeEvent): Change {
  const deleted = event.type.endsWith('.deleted') && event.type !== 'customer.subscription.deleted';
  // Events carry whole seconds: the change happened at the latest at the end of that second.
  return { object: event.data.object, version: event.created * 1000 + 999, ...(deleted ? { deleted: true } : {}) };
}

export interface PollResult {
  cursor: EventsCursor;
  /** Events read after the cursor, and events listed late found behind it (late-events.ts). */
  events: number;
  late: number;
  applied: ApplyResult;
}

export interface PollOptions {
  nowS?: number;
  /** The feed's reader of the trailing window, and whether to read it now (someone waits). */
  late?: { reader: LateEvents; now: boolean };
}

/**
 * Reads the events after the cursor, oldest first, and applies each page with the new
 * cursor in one transaction: a crash re-reads at most a page, and re-applying is harmless.
 * The feed is that of the account the client acts on (a connected account's, or the key's own).
 * Each event is also a row of `event`, kept past Stripe's 30 days.
 * What the page's objects bring about that has no events of its own (balance transactions,
 * payment methods used unattached, child lists past their first page) is fetched first and
 * written in the same transaction (unevented.ts).
 */
export async function pollEvents(client: StripeClient, db: pg.Pool, cursor: EventsCursor, options: PollOptions = {}): Promise<PollResult> {
  const nowS = options.nowS ?? Date.now() / 1000;
  if (cursor.created < nowS - RETENTION_S + RETENTION_MARGIN_S) {
    throw new CursorExpired(`the events cursor (${new Date(cursor.created * 1000).toISOString()}) is older than Stripe's 30-day event retention`);
  }
  const total: PollResult = { cursor, events: 0, late: 0, applied: { written: 0, deleted: 0, stale: 0, unknown: 0 } };
  for (;;) {
    const batch = cursor.id ? await newerThan(client, cursor.id) : await since(client, cursor.created);
    if (batch.events.length === 0) break;
    const newest = batch.events.at(-1)!;
    const next: EventsCursor = { id: newest.id, created: newest.created };
    const applied = await applyEvents(client, db, batch.events, await inPinnedVersion(client, batch.events), next);
    total.events += batch.events.length;
    addApplied(total.applied, applied);
    total.cursor = cursor = next;
    if (!batch.more) break;
  }
  // After what is new, so that the window reaches the newest cursor.
  if (options.late) {
    const late = await options.late.reader.check(client, db, cursor, options.late.now);
    total.late = late.found;
    if (late.applied) addApplied(total.applied, late.applied);
  }
  return total;
}

export function addApplied(total: ApplyResult, more: ApplyResult): void {
  for (const k of ['written', 'deleted', 'stale', 'unknown'] as const) total[k] += more[k];
}

/**
 * Applies events, oldest first, as `changes` (their objects, or those objects fetched again),
 * in one transaction with the cursor when one is given.
 */
export async function applyEvents(
  client: StripeClient,
  db: pg.Pool,
  events: StripeEvent[],
  objectChanges: Change[],
  next: EventsCursor | undefined,
): Promise<ApplyResult> {
  const changes = [...objectChanges, ...(await numberedCustomers(client, events))];
  // The events themselves, as read: the `event` table, the account's audit trail.
  const recorded = events.map((event): Change => ({ object: event as unknown as StripeObject, version: event.created * 1000 + 999 }));
  const unevented = await uneventedOf(client, db, changes);
  const account = client.account;
  return inTransaction(db, async (tx) => {
    const result = await applyChanges(tx, [...changes, ...unevented.changes, ...recorded], unevented.lists, account);
    // Upcoming invoices are previewed for the key's own customers only.
    if (account === null) await markUpcoming(tx, events);
    if (next) await saveState(tx, STRIPE_SCHEMAS, stateKeys(account).events, next);
    return result;
  });
}

/** Where an object of a table can be fetched by id: its top-level list path plus the id. */
export function retrievePath(objectName: string, id: string): string | undefined {
  const list = tableForObject(objectName)?.lists.find((l) => !l.path.includes('{'));
  return list ? `${list.path}/${encodeURIComponent(id)}` : undefined;
}

/**
 * Events render their object in the account's default API version, which may not be the one
 * the tables follow: a field renamed or moved since would land as NULL. Such objects are
 * fetched again in the pinned version (once per object per page; deletions need no fetch).
 */
async function inPinnedVersion(client: StripeClient, events: StripeEvent[]): Promise<Change[]> {
  const changes = events.map(changeOf);
  const stale = new Map<string, number>();
  events.forEach((event, i) => {
    if (!event.api_version || event.api_version === STRIPE_API_VERSION || changes[i]!.deleted) return;
    stale.set(`${event.data.object.object}:${event.data.object.id}`, i);
  });
  const out: Change[] = [];
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!;
    const key = `${change.object.object}:${change.object.id}`;
    if (!stale.has(key)) {
      out.push(change);
      continue;
    }
    // Only the last event of the object in this page fetches it; the earlier ones add nothing.
    if (stale.get(key) !== i) continue;
    const path = retrievePath(String(change.object.object), String(change.object.id));
    if (!path) {
      out.push(change);
      continue;
    }
    const fetchedAt = Date.now();
    try {
      out.push({ object: await client.request<StripeObject>('GET', path), version: fetchedAt });
    } catch (error) {
      // Gone since: its deletion event follows.
      if (!(error instanceof StripeError && error.kind === 'missing')) throw error;
    }
  }
  return out;
}

/** The page of events just after `id`, oldest first. */
async function newerThan(client: StripeClient, id: string): Promise<{ events: StripeEvent[]; more: boolean }> {
  try {
    const page = await client.listPage('/v1/events', { ending_before: id });
    return { events: (page.data as unknown as StripeEvent[]).reverse(), more: page.has_more };
  } catch (error) {
    if (error instanceof StripeError && error.kind === 'missing') throw new CursorExpired(`Stripe no longer has event ${id}: ${error.message}`);
    throw error;
  }
}

/** Every event since a time (no event seen yet), oldest first. */
async function since(client: StripeClient, created: number): Promise<{ events: StripeEvent[]; more: boolean }> {
  const events: StripeEvent[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await client.listPage('/v1/events', { 'created[gte]': created, ...(after ? { starting_after: after } : {}) });
    events.push(...(page.data as unknown as StripeEvent[]));
    after = page.data.at(-1)?.id;
    if (!page.has_more || !after) break;
  }
  return { events: events.reverse(), more: false };
}
