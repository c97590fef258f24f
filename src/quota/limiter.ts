import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { TributaryError } from '../errors.ts';
import { pause } from '../time.ts';
import { grantOf, type QuotaGrant } from './grant.ts';

export type { QuotaGrant } from './grant.ts';

/** At most `limit` requests in any `windowMs`, as the upstream counts them. */
export interface QuotaRule {
  limit: number;
  windowMs: number;
  /** The safety margin added to the window (default: the limiter's); doubled after each 429. */
  marginMs?: number;
  /**
   * Past the limit the upstream locks the key out (Airtable: 30 s), so a slot is held until a
   * window after the request's answer began, the latest it can have arrived, however slow or
   * jittery the path (src/quota/grant.ts). Without it (Stripe: a 429 only spends the second),
   * a window and the margin after the request left.
   */
  lockout?: boolean;
}

export interface AcquireOptions {
  /**
   * Clients (proxy requests) go first; sync requests step aside while a client waits.
   * 'unverified': a proxied request whose credential is not known good for this quota
   * (src/proxy/credentials.ts): granted from an allowance of its own, never queued.
   */
  kind: 'client' | 'sync' | 'unverified';
  /** Unverified requests: how many of them the window may hold (default 1). */
  unverified?: number;
  /** Sync requests' own cap within the window (Airtable: 3 of 5, or 5 with Turbo). */
  syncLimit?: number;
  /**
   * The sync's share leaves the rest of the limit to requests this quota never sees (the
   * customer's own requests straight to the upstream, for every kind the service syncs), so
   * it must hold as the upstream counts it: over the window plus the margin, like the limit.
   * Without it the share is kept over the exact window, which is right only when every other
   * request to the upstream goes through this quota.
   */
  shareMargin?: boolean;
  /**
   * A sync request someone is waiting on (change capture): within the sync's share it
   * goes before sweep requests, still after clients. A function is asked at each try: a
   * request already waiting becomes urgent when someone starts to wait on it. (A function,
   * not a getter: spreading the options would read a getter once.)
   */
  urgent?: boolean | (() => boolean);
  signal?: AbortSignal;
  /** Give up after this long (clients: a bounded queue). Default: wait as long as it takes. */
  maxWaitMs?: number;
  /**
   * A second quota the request also counts against (Airtable's per-user limit across
   * bases): granted only when both have room, and logged under both. Requests refused by it
   * wait in one line for it, clients first, then urgent sync requests, then sweeps, each
   * rank first come, first served (sql/19), so the syncs that share it share it fairly.
   * `syncLimit`: the sync requests' share of it (kept over the window plus the margin, as it
   * leaves room for requests the quota cannot see coming); default all of it.
   */
  also?: { key: string; rule: QuotaRule; syncLimit?: number };
}

export const DEFAULT_MARGIN_MS = 40;

export interface QuotaLimiterOptions {
  pool: pg.Pool;
  /**
   * Added to the window: the upstream counts arrival times, which jitter against ours.
   * A 429 costs a 30 s lockout, so the margin must cover the spread of send-to-arrival
   * delays; 40 ms does on one network hop and costs 4 % of the rate.
   */
  marginMs?: number;
}

interface Decision {
  granted: boolean;
  /** When to look again, if not granted. */
  retryInMs: number;
  /** Refused because the second quota (`also`) had no slot for it. */
  heldByAlso?: boolean;
  /** The granted request's entry in the log, and our clock just before it was written. */
  at?: string;
  loggedAt?: number;
}

/** Rank in the queue: clients 0, urgent sync requests 1; sweeps (2) queue only for a second quota, unverified requests never. */
function rankOf(options: AcquireOptions, urgent: boolean): number | undefined {
  if (options.kind === 'client') return 0;
  if (options.kind !== 'sync') return undefined;
  return urgent ? 1 : options.also ? 2 : undefined;
}

const isUrgent = (options: AcquireOptions) => (typeof options.urgent === 'function' ? options.urgent() : options.urgent === true);

const REFUSAL_MEMORY_MS = 10 * 60_000;

/**
 * A sliding-window request log per upstream key, kept in the control database so every
 * process (sync workers, proxies) draws on the same quota. Each decision runs under a
 * transaction-scoped advisory lock on the key, so two processes never both take the
 * last slot of a window.
 */
export class QuotaLimiter {
  private readonly pool: pg.Pool;
  private readonly marginMs: number;
  /** Per key: when the upstream last answered 429 anyway, and how many times in a row. */
  private readonly refused = new Map<string, { at: number; count: number }>();
  private acquiredSincePrune = 0;

  constructor(options: QuotaLimiterOptions) {
    this.pool = options.pool;
    this.marginMs = options.marginMs ?? DEFAULT_MARGIN_MS;
  }

  /**
   * The upstream refused a request we let through: its clock and ours disagree by more
   * than the margin on this path. The margin for the key doubles (up to 8×) and returns to
   * normal after ten minutes without another refusal.
   */
  refusedByUpstream(key: string): void {
    const last = this.refused.get(key);
    const count = last && Date.now() - last.at < REFUSAL_MEMORY_MS ? last.count + 1 : 1;
    this.refused.set(key, { at: Date.now(), count });
  }

  /** The margin for a key now: the base one, widened after recent refusals. */
  marginFor(key: string, rule?: QuotaRule): number {
    const base = rule?.marginMs ?? this.marginMs;
    const last = this.refused.get(key);
    if (!last || Date.now() - last.at >= REFUSAL_MEMORY_MS) return base;
    return base * 2 ** Math.min(3, last.count);
  }

  async acquire(key: string, rule: QuotaRule, options: AcquireOptions): Promise<QuotaGrant> {
    const started = Date.now();
    // One token for the request's whole wait, whatever its rank at each try.
    const waiter = randomUUID();
    let at: string | undefined;
    let loggedAt = Date.now();
    let heldByAlsoMs = 0;
    // The rank a refusal announced this waiter at in quota_waiting (a grant at the first try never announces it).
    let announced: number | undefined;
    const forget = () =>
      this.pool.query('DELETE FROM quota_waiting WHERE key = ANY($1) AND token = $2', [options.also ? [key, options.also.key] : [key], waiter]);
    try {
      for (;;) {
        // Read at each try: a sync request already waiting becomes urgent when someone starts to
        // wait on it, and stops being so once another pass has answered them. (Found in a test:
        // a wait that arrived while a timer poll waited for its slot was answered seconds later
        // by the next cycle; the poll kept its rank and the urgent poll could not start.)
        const urgent = isUrgent(options);
        const rank = rankOf(options, urgent);
        if (announced !== undefined && (rank === undefined || rank > announced)) {
          // Less urgent than announced: the line must not keep the old rank for its two seconds.
          // (More urgent keeps its row: the second quota's line takes the new rank, and its place.)
          await forget();
          announced = undefined;
        }
        const decision = await this.tryTake(key, rule, options, urgent, rank === undefined ? undefined : { token: waiter, rank });
        if (decision.granted) {
          at = decision.at;
          loggedAt = decision.loggedAt ?? loggedAt;
          break;
        }
        if (rank !== undefined) announced = rank;
        if (options.maxWaitMs !== undefined && Date.now() - started + decision.retryInMs > options.maxWaitMs) {
          // Exposed: an API request that checks a key answers 503 with Retry-After, not a bare 500.
          throw new TributaryError('unavailable', `upstream quota for ${decision.heldByAlso ? options.also!.key : key} is exhausted; retry later`, {
            expose: true,
            retryAfterSeconds: Math.max(1, Math.ceil(decision.retryInMs / 1000)),
          });
        }
        const pausedAt = Date.now();
        await pause(decision.retryInMs, options.signal);
        if (decision.heldByAlso) heldByAlsoMs += Date.now() - pausedAt;
        options.signal?.throwIfAborted();
      }
    } finally {
      if (announced !== undefined) await forget();
    }
    if (++this.acquiredSincePrune >= 200) {
      this.acquiredSincePrune = 0;
      await this.pool.query("DELETE FROM quota_requests WHERE at < clock_timestamp() - interval '5 minutes'");
    }
    const { also } = options;
    return grantOf({
      pool: this.pool,
      keys: also ? [key, also.key] : [key],
      at: at!,
      loggedAt,
      windowMs: rule.windowMs,
      untilAnswered: rule.lockout === true,
      marginMs: Math.min(this.marginFor(key, rule), also ? this.marginFor(also.key, also.rule) : Number.POSITIVE_INFINITY),
      heldByAlsoMs,
    });
  }

  private async tryTake(
    key: string,
    rule: QuotaRule,
    options: AcquireOptions,
    urgent: boolean,
    waiter: { token: string; rank: number } | undefined,
  ): Promise<Decision> {
    // The margin guards the upstream's own limit. A sync's share is ours to keep exactly, so
    // a sync at 3 req/s really gets 3 (the sweep-time bound depends on it), unless the share
    // is what leaves room for requests we never see: then it is an upstream limit too, and the
    // upstream counts arrival times, which jitter against our grant times by more than the
    // 1 ms the exact window leaves between the oldest grant and the next (shareMargin).
    const margin = this.marginFor(key, rule);
    const windowMs = rule.windowMs + margin;
    const shareWindowMs = rule.windowMs + (options.shareMargin ? margin : 0);
    // One statement (sql/11_quota_take.sql): the decision used to cost five round trips.
    const kind = options.kind === 'sync' && urgent ? 'urgent' : options.kind;
    const loggedAt = Date.now();
    const values: unknown[] = [key, rule.limit, windowMs, shareWindowMs, kind, options.syncLimit ?? rule.limit, waiter?.token ?? null, waiter?.rank ?? 0];
    const { also } = options;
    const { rows } = await this.pool.query<{ granted: boolean; retry_in_ms: number; at: string | null; held_by_also?: boolean }>(
      options.kind === 'unverified'
        ? {
            // sql/16: an allowance of its own, the credential's second quota (if any) in the same statement.
            name: 'quota_take_unverified',
            text: 'SELECT granted, retry_in_ms, at FROM quota_take_unverified($1, $2, $3, $4, $5, $6, $7)',
            values: [
              key,
              rule.limit,
              windowMs,
              options.unverified ?? 1,
              also?.key ?? null,
              also?.rule.limit ?? null,
              also ? also.rule.windowMs + this.marginFor(also.key, also.rule) : null,
            ],
          }
        : also
          ? {
              // sql/19: both quotas in the same statement, and a line for the second one.
              name: 'quota_take_also',
              text: 'SELECT granted, retry_in_ms, at, held_by_also FROM quota_take_also($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
              values: [...values, also.key, also.rule.limit, also.rule.windowMs + this.marginFor(also.key, also.rule), also.syncLimit ?? null],
            }
          : { name: 'quota_take', text: 'SELECT granted, retry_in_ms, at FROM quota_take($1, $2, $3, $4, $5, $6, $7, $8)', values },
    );
    const row = rows[0]!;
    if (!row.granted) return { granted: false, retryInMs: Number(row.retry_in_ms), heldByAlso: row.held_by_also === true };
    return { granted: true, retryInMs: 0, at: row.at!, loggedAt };
  }
}
