import type pg from 'pg';

/**
 * A granted request. Its entry in the log holds a slot for the window plus the margin after
 * its time. `sent()`, just before it goes: a request held up since its grant (a busy event
 * loop, a body streaming in) is counted from when it really left.
 *
 * Where a 429 locks the key out (`untilAnswered`), the entry follows what is known of the
 * arrival, never what is guessed of the path. The upstream counts a request when it arrives,
 * somewhere between the moment it left and the moment its answer began; on a slow or jittery
 * path that can be most of a second after it left, and a request that left later can arrive
 * first (the simulation's `upstream-slow` drew Airtable 429s that way). So:
 * - while the request is out, its slot never lapses (it may arrive at any moment);
 * - `answered()`, once its answer began or it failed: it arrived by then at the latest, so
 *   the slot is held until a whole window after that.
 * Then requests that arrive within one window of each other were all in the log when the
 * last of them was granted, however the path's delay changed between them. The cost: each
 * slot is held for the window plus the request's round trip, where the margin alone would
 * do on a steady path (docs/performance.md).
 */
export interface QuotaGrant {
  sent(): void;
  answered(): void;
  /** How long the request waited because the second quota (`also`) had no slot for it. */
  heldByAlsoMs: number;
}

export interface GrantEntry {
  pool: pg.Pool;
  /** The keys the entry was logged under (the quota's, and its second quota's). */
  keys: string[];
  /** The entry's time as the log holds it (the control database's clock). */
  at: string;
  /** Our clock just before the entry was written: shifts are measured from it. */
  loggedAt: number;
  /** The upstream's window. */
  windowMs: number;
  /** Hold the slot until a window after the answer (a rule with a lockout). */
  untilAnswered: boolean;
  /** The margin the entry is kept beyond its window (the smaller, where two quotas hold it). */
  marginMs: number;
  heldByAlsoMs: number;
}

/** Moved less than this, the entry stays: the margin covers it. */
const RESTAMP_AFTER_MS = 5;
/** A slot kept for a request still out is renewed this long before it would lapse. */
const RENEW_LEAD_MS = 100;
/** A request never answered (a caller that forgot) stops holding its slot open after this. */
const LONGEST_FLIGHT_MS = 5 * 60_000;

export function grantOf(entry: GrantEntry): QuotaGrant {
  // Each restamp is a shift of the entry from its first time; only ever later. They run one
  // after another, each matching the time the one before it wrote.
  let shifted = 0;
  let current = entry.at;
  let chain: Promise<void> = Promise.resolve();
  let renewal: NodeJS.Timeout | undefined;
  let done = false;
  const holdMs = entry.windowMs + entry.marginMs;

  const shiftTo = (ms: number) => {
    if (ms < shifted + RESTAMP_AFTER_MS) return;
    shifted = ms;
    // Fire and forget: the next decision this entry bounds is most of a window away.
    chain = chain
      .then(async () => {
        const { rows } = await entry.pool.query<{ at: string }>(
          `UPDATE quota_requests SET at = $3::timestamptz + make_interval(secs => $4 / 1000.0)
            WHERE key = ANY($1) AND at = $2 RETURNING at::text`,
          [entry.keys, current, entry.at, ms],
        );
        if (rows[0]) current = rows[0].at;
      })
      .catch(() => undefined);
  };
  const renew = (after: number) => {
    renewal = setTimeout(
      () => {
        if (done) return;
        // Still out: the slot must not lapse before the request has arrived.
        const now = Date.now() - entry.loggedAt;
        shiftTo(now);
        if (now < LONGEST_FLIGHT_MS) renew(holdMs - RENEW_LEAD_MS);
      },
      Math.max(0, after),
    );
    renewal.unref();
  };

  return {
    heldByAlsoMs: entry.heldByAlsoMs,
    sent() {
      if (done) return;
      const late = Date.now() - entry.loggedAt;
      shiftTo(late);
      if (!entry.untilAnswered) return;
      clearTimeout(renewal);
      renew(holdMs - RENEW_LEAD_MS);
    },
    answered() {
      if (done || !entry.untilAnswered) return;
      done = true;
      clearTimeout(renewal);
      // Arrived by now: held a whole window from here (the margin is already in the hold).
      shiftTo(Date.now() - entry.loggedAt - entry.marginMs);
    },
  };
}
