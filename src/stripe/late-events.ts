/**
 * Stripe's events list is eventually consistent: an event can be listed seconds after newer
 * events were (UPSTREAMS.md). The feed asks only for what comes after the newest event it
 * applied (`ending_before`), so such an event, listed behind that cursor, would never be read.
 *
 * So the feed also reads a trailing window again: every event created in the last `windowS`
 * seconds, up to the cursor's place, and applies those it has not (the `event` table's versions
 * hold the id of every event applied). The live path is untouched: new events are read as they
 * come, and the window is read apart, every `everyMs`, and for every wait. A window with no
 * event applied in it costs nothing: whatever is late there is listed after the cursor, where
 * the feed reads it anyway. docs/stripe.md says why the window is a minute.
 *
 * A late event's object is fetched again rather than taken from the event: newer events of the
 * same object may be applied already, with the same whole-second version, and the object as it
 * is now is right whatever order they came in.
 */
import type pg from 'pg';
import type { Logger } from '../log.ts';
import { type StripeClient, StripeError, type StripeObject } from './client.ts';
import { applyEvents, changeOf, type EventsCursor, retrievePath, type StripeEvent } from './events.ts';
import type { ApplyResult, Change } from './store.ts';
import { rowKey, stripeTables } from './tables.ts';

/** How far back the window reaches: ten times the delays reported, and what Estuary reads behind. */
export const LATE_WINDOW_S = 60;
/** How often the window is read again while events are applied within it. */
export const LATE_EVERY_MS = 5_000;

export interface LateEventsOptions {
  /** How far back the window reaches (default LATE_WINDOW_S); 0 reads no window. */
  windowS?: number;
  everyMs?: number;
  logger: Logger;
}

/** What the window's reads found and cost, since the reader was made. */
export interface LateEventsStats {
  reads: number;
  requests: number;
  found: number;
}

/** The window's reads for one feed (the key's own, or one connected account's). */
export class LateEvents {
  private lastAt = 0;
  readonly stats: LateEventsStats = { reads: 0, requests: 0, found: 0 };

  constructor(private readonly options: LateEventsOptions) {}

  /**
   * Reads the window again when it is due (or `now` for a wait) and applies the late events
   * found; returns how many there were.
   */
  async check(client: StripeClient, db: pg.Pool, cursor: EventsCursor, now: boolean): Promise<{ found: number; applied?: ApplyResult }> {
    const windowS = this.options.windowS ?? LATE_WINDOW_S;
    const nowMs = Date.now();
    const from = Math.floor(nowMs / 1000) - windowS;
    if (windowS === 0 || cursor.id === null || cursor.created < from) return { found: 0 };
    if (!now && nowMs - this.lastAt < (this.options.everyMs ?? LATE_EVERY_MS)) return { found: 0 };
    this.lastAt = nowMs;
    this.stats.reads++;
    const listed = await this.window(client, cursor, from);
    const late = await unapplied(db, listed, client.account);
    if (late.length === 0) return { found: 0 };
    const changes = await this.current(client, late);
    const applied = await applyEvents(client, db, late, changes, undefined);
    this.stats.found += late.length;
    this.options.logger.info(
      { late: late.length, ids: late.slice(0, 10).map((e) => e.id), written: applied.written, deleted: applied.deleted },
      'Stripe listed events late, behind newer ones; read from the trailing window',
    );
    return { found: late.length, applied };
  }

  /** The window's events up to the cursor's place, oldest first. */
  private async window(client: StripeClient, cursor: EventsCursor, from: number): Promise<StripeEvent[]> {
    const out: StripeEvent[] = [];
    let after: string | undefined;
    // Newest first: those of the cursor's second listed before the cursor come after it, and
    // are the feed's to read.
    let pastCursor = false;
    for (;;) {
      this.stats.requests++;
      const page = await client.listPage('/v1/events', {
        'created[gte]': from,
        'created[lte]': cursor.created,
        ...(after ? { starting_after: after } : {}),
      });
      for (const event of page.data as unknown as StripeEvent[]) {
        if (event.id === cursor.id) pastCursor = true;
        else if (pastCursor || event.created < cursor.created) out.push(event);
      }
      after = page.data.at(-1)?.id;
      if (!page.has_more || !after) return out.reverse();
    }
  }

  /** Each late event's object as it is now, fetched by id; a deletion as the event says. */
  private async current(client: StripeClient, events: StripeEvent[]): Promise<Change[]> {
    const out: Change[] = [];
    const fetched = new Set<string>();
    // Newest first, so each object is fetched once, for its latest late event.
    for (const event of [...events].reverse()) {
      const change = changeOf(event);
      const key = `${change.object.object}:${change.object.id}`;
      if (fetched.has(key)) continue;
      fetched.add(key);
      const path = change.deleted ? undefined : retrievePath(String(change.object.object), String(change.object.id));
      if (!path) {
        out.push(change);
        continue;
      }
      try {
        this.stats.requests++;
        const object = await client.request<StripeObject>('GET', path);
        // Versioned by the end of the second it was read in, as every fetched object is.
        out.push({ object, version: Math.floor(Date.now() / 1000) * 1000 + 999 });
      } catch (error) {
        // Gone since: its deletion is an event of its own, read or to be read.
        if (!(error instanceof StripeError && error.kind === 'missing')) throw error;
      }
    }
    return out.reverse();
  }
}

/** The events whose row of `event` is not written yet: not applied. */
async function unapplied(db: pg.Pool, events: StripeEvent[], account: string | null): Promise<StripeEvent[]> {
  if (events.length === 0) return [];
  const table = stripeTables().get('event')!;
  const keys = events.map((e) => rowKey(table, e as unknown as StripeObject, account));
  const known = await db.query<{ id: string }>("SELECT id FROM public_swap._stripe_versions WHERE tbl = 'event' AND id = ANY($1::text[])", [keys]);
  const seen = new Set(known.rows.map((r) => r.id));
  return events.filter((_, i) => !seen.has(keys[i]!));
}
