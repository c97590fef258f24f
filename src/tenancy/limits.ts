import { TributaryError } from '../errors.ts';
import { TokenBuckets } from './token-buckets.ts';
import { KeyedLimit, type Release } from './keyed-limit.ts';

/**
 * What one account may have going at once in one process. The numbers are far above what a
 * client needs (a console opens a handful of reads, a consumer one long poll per instance), so
 * only a runaway or hostile client meets them.
 */
export interface TenantLimits {
  /** Open long polls on the event REST interface (`/consume`, `/fetch`). */
  longPolls: number;
  /** Open waits (`/api/wait/:id`). */
  waits: number;
  /** Reads that cost more than a lookup: the syncs list and the console's tables, connection and history. */
  reads: number;
  /** Its requests worked on at once (long polls and waits aside); the next wait their turn. */
  requests: number;
  /** Connections of the control-database pool (of 10) its requests hold at once; more wait in line. */
  controlConnections: number;
  /** Management API requests a second (a burst of twice as many); 429 past it. */
  requestsPerSecond: number;
}

export const DEFAULT_TENANT_LIMITS: TenantLimits = { longPolls: 50, waits: 100, reads: 20, requests: 8, controlConnections: 3, requestsPerSecond: 200 };

/** What the management API caps (the event REST interface caps its long polls itself, by `longPolls`). */
export type CappedKind = 'waits' | 'reads';

const WHAT: Record<CappedKind, string> = {
  waits: 'waits',
  reads: 'reads of the syncs list and of the console (tables, connection, history)',
};

/** A 429 that says a second is enough to wait (the Retry-After header). */
export function tooManyRequests(message: string): TributaryError {
  return new TributaryError('too_many_requests', message, { retryAfterSeconds: 1 });
}

/**
 * The per-account caps that refuse rather than queue: a request past one answers 429 at once.
 * A queued long poll or wait would still hold its socket and memory while it waits, and a
 * client that opened that many gains nothing from more; a clear refusal tells it so.
 */
export class TenantCaps {
  private readonly caps: Record<CappedKind, KeyedLimit>;

  private readonly rate: TokenBuckets;

  constructor(readonly limits: TenantLimits = DEFAULT_TENANT_LIMITS) {
    // A burst of two seconds' worth; kept for at most 50,000 accounts (the least recent go first).
    this.rate = new TokenBuckets(2 * limits.requestsPerSecond, 2_000, 50_000);
    this.caps = { waits: new KeyedLimit(limits.waits), reads: new KeyedLimit(limits.reads) };
  }

  /**
   * One more management API request of the account: a 429 past its rate. Working places bound
   * how many of its requests run at once, but a route answered from memory is all CPU, and one
   * account's thousand in flight then took most of it from the others.
   */
  request(accountId: string): void {
    const now = Date.now();
    const seconds = this.rate.waitSeconds(accountId, now);
    if (seconds > 0) {
      throw new TributaryError('too_many_requests', `more than ${this.limits.requestsPerSecond} requests a second from one account; retry after ${seconds} s`, {
        retryAfterSeconds: seconds,
      });
    }
    this.rate.spend(accountId, now);
  }

  /** A place for one more of the account's `kind`; a 429 when it has `limit` open. */
  enter(kind: CappedKind, accountId: string): Release {
    const release = this.caps[kind].tryAcquire(accountId);
    if (release) return release;
    const limit = this.caps[kind].limit;
    throw tooManyRequests(`at most ${limit} ${WHAT[kind]} of one account may be open at once; retry when one of them has answered`);
  }

  /** Runs `work` holding a place (the operator, `undefined`, is not capped). */
  async within<T>(kind: CappedKind, accountId: string | undefined, work: () => Promise<T>): Promise<T> {
    const release = accountId === undefined ? undefined : this.enter(kind, accountId);
    try {
      return await work();
    } finally {
      release?.();
    }
  }
}
