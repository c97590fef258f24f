import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../db/sql.ts';
import { TributaryError } from '../errors.ts';
import { pause } from '../time.ts';

/** At most `limit` requests in any `windowMs`, as the upstream counts them. */
export interface QuotaRule {
  limit: number;
  windowMs: number;
}

export interface AcquireOptions {
  /** Clients (proxy requests) go first; sync requests step aside while a client waits. */
  kind: 'client' | 'sync';
  /** Sync requests' own cap within the window (Airtable: 3 of 5, or 5 with Turbo). */
  syncLimit?: number;
  /**
   * A sync request someone is waiting on (change capture): within the sync's share it
   * goes before sweep requests, still after clients.
   */
  urgent?: boolean;
  signal?: AbortSignal;
  /** Give up after this long (clients: a bounded queue). Default: wait as long as it takes. */
  maxWaitMs?: number;
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
  /** The granted request's entry in the log, and our clock just before it was written. */
  at?: string;
  loggedAt?: number;
}

/**
 * A granted request. The log says it left when it was granted; call `sent()` just before
 * it really goes, so a request held up in between (a busy event loop) is logged at the
 * time the upstream will count it, and the next window opens no earlier than it should.
 */
export interface QuotaGrant {
  sent(): void;
}

const REFUSAL_MEMORY_MS = 10 * 60_000;

/** Held up less than this, a request keeps its grant time: the margin covers it. */
const RESTAMP_AFTER_MS = 5;

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
  marginFor(key: string): number {
    const last = this.refused.get(key);
    if (!last || Date.now() - last.at >= REFUSAL_MEMORY_MS) return this.marginMs;
    return this.marginMs * 2 ** Math.min(3, last.count);
  }

  async acquire(key: string, rule: QuotaRule, options: AcquireOptions): Promise<QuotaGrant> {
    const started = Date.now();
    // Rank in the queue: clients 0, urgent sync requests 1; sweeps do not queue.
    const rank = options.kind === 'client' ? 0 : options.urgent ? 1 : undefined;
    const waiter = rank === undefined ? undefined : randomUUID();
    let at: string | undefined;
    let loggedAt = Date.now();
    // Whether a refusal announced this waiter in quota_waiting (a grant at the first try never does).
    let announced = false;
    try {
      for (;;) {
        const decision = await this.tryTake(key, rule, options, waiter && { token: waiter, rank: rank! });
        if (decision.granted) {
          at = decision.at;
          loggedAt = decision.loggedAt ?? loggedAt;
          break;
        }
        announced = waiter !== undefined;
        if (options.maxWaitMs !== undefined && Date.now() - started + decision.retryInMs > options.maxWaitMs) {
          throw new TributaryError('unavailable', `upstream quota for ${key} is exhausted; retry later`);
        }
        await pause(decision.retryInMs, options.signal);
        options.signal?.throwIfAborted();
      }
    } finally {
      if (announced) await this.pool.query('DELETE FROM quota_waiting WHERE key = $1 AND token = $2', [key, waiter]);
    }
    if (++this.acquiredSincePrune >= 200) {
      this.acquiredSincePrune = 0;
      await this.pool.query("DELETE FROM quota_requests WHERE at < clock_timestamp() - interval '5 minutes'");
    }
    return {
      sent: () => {
        // Measured from before the log entry was written: a pause anywhere since counts.
        const late = Date.now() - loggedAt;
        if (late < RESTAMP_AFTER_MS) return;
        // Fire and forget: the next decision that this entry bounds is a window away.
        this.pool
          .query('UPDATE quota_requests SET at = at + make_interval(secs => $3 / 1000.0) WHERE key = $1 AND at = $2', [key, at, late])
          .catch(() => undefined);
      },
    };
  }

  private async tryTake(
    key: string,
    rule: QuotaRule,
    options: AcquireOptions,
    waiter: { token: string; rank: number } | undefined,
  ): Promise<Decision> {
    // The margin guards the upstream's own limit; a sync's share is ours to keep exactly,
    // so a sync at 3 req/s really gets 3 (the sweep-time bound depends on it).
    const windowMs = rule.windowMs + this.marginFor(key);
    const shareWindowMs = rule.windowMs;
    // The log is a guard, not a record: no need to wait for the disk on every grant.
    return inTransaction(
      this.pool,
      async (client) => {
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 7))', [key]);
        const { rows: logged } = await client.query<{ age_ms: number; kind: 'client' | 'sync' | 'urgent' }>(
          `SELECT extract(epoch FROM clock_timestamp() - at) * 1000 AS age_ms, kind
             FROM quota_requests
            WHERE key = $1 AND at > clock_timestamp() - make_interval(secs => $2 / 1000.0)
            ORDER BY at`,
          [key, windowMs],
        );
        const rows = logged.map((r) => ({ ...r, age_ms: Number(r.age_ms) }));
        // When the i-th newest request leaves the window, one more slot opens.
        const freesIn = (list: typeof rows, over: number, window: number) => Math.max(1, window - list[list.length - over]!.age_ms + 1);
        let decision: Decision = { granted: true, retryInMs: 0 };
        if (rows.length >= rule.limit) decision = { granted: false, retryInMs: freesIn(rows, rule.limit, windowMs) };
        if (decision.granted && options.kind === 'sync') {
          const syncRows = rows.filter((r) => r.kind !== 'client' && r.age_ms < shareWindowMs);
          const syncLimit = options.syncLimit ?? rule.limit;
          if (syncRows.length >= syncLimit) decision = { granted: false, retryInMs: freesIn(syncRows, syncLimit, shareWindowMs) };
          else {
            // Step aside for anyone queued ahead of this request's rank; but a sweep that has
            // had no slot in this window takes one, so change capture cannot starve it.
            const sweepServed = rows.some((r) => r.kind === 'sync' && r.age_ms < shareWindowMs);
            const ahead = options.urgent ? 1 : sweepServed ? 2 : 1;
            const waiting = await client.query(
              'SELECT 1 FROM quota_waiting WHERE key = $1 AND until > clock_timestamp() AND rank < $2 AND token <> $3 LIMIT 1',
              [key, ahead, waiter?.token ?? ''],
            );
            if (waiting.rowCount) decision = { granted: false, retryInMs: 25 };
          }
        }
        if (decision.granted) {
          const kind = options.kind === 'sync' && options.urgent ? 'urgent' : options.kind;
          decision.loggedAt = Date.now();
          const { rows: inserted } = await client.query<{ at: string }>(
            'INSERT INTO quota_requests (key, at, kind) VALUES ($1, clock_timestamp(), $2) RETURNING at::text',
            [key, kind],
          );
          decision.at = inserted[0]!.at;
        } else if (waiter) {
          // Announce the queued request so lower ranks hold back until it has gone.
          await client.query(
            `INSERT INTO quota_waiting (key, token, until, rank) VALUES ($1, $2, clock_timestamp() + interval '2 seconds', $3)
             ON CONFLICT (key, token) DO UPDATE SET until = excluded.until`,
            [key, waiter.token, waiter.rank],
          );
        }
        return decision;
      },
      ['synchronous_commit = off'],
    );
  }
}
