import { trimOldest } from '../bounded-map.ts';

interface Bucket {
  /** Spends still allowed now (fractional while refilling): failed credential checks, requests. */
  tokens: number;
  at: number;
  /** When the last "throttled" log line for this key was written. */
  loggedAt: number | undefined;
  /** Attempts refused since that line. */
  refused: number;
}

/**
 * A token bucket per key: `limit` spends at once (failed credential checks, requests), refilled
 * at `limit` per `windowMs`.
 * Kept in memory, at most `maxKeys` keys: a key not touched for longest goes first, and a
 * bucket that has refilled is forgotten (it is the same as none).
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly maxKeys: number,
  ) {}

  get size(): number {
    return this.buckets.size;
  }

  /** Whole seconds until `key` may spend once more; 0 when it may now. */
  waitSeconds(key: string, now: number): number {
    const bucket = this.current(key, now);
    if (!bucket || bucket.tokens >= 1) return 0;
    return Math.max(1, Math.ceil(((1 - bucket.tokens) * this.windowMs) / this.limit / 1000));
  }

  spend(key: string, now: number): void {
    const bucket = this.current(key, now) ?? { tokens: this.limit, at: now, loggedAt: undefined, refused: 0 };
    bucket.tokens -= 1;
    // Re-inserted, so that the map's order is least recently spent first.
    this.buckets.delete(key);
    this.buckets.set(key, bucket);
    trimOldest(this.buckets, this.maxKeys);
  }

  /** Gives back what `spend` took: the check did not fail after all. */
  refund(key: string, now: number): void {
    const bucket = this.current(key, now);
    if (!bucket) return;
    bucket.tokens = Math.min(this.limit, bucket.tokens + 1);
    this.forgetIfIdle(key, bucket, now);
  }

  /**
   * Counts a refused attempt. Answers how many were refused since the last log line when one
   * is due now (the first refusal, then at most one a window), else 0.
   */
  refused(key: string, now: number): number {
    const bucket = this.current(key, now);
    if (!bucket) return 0;
    bucket.refused += 1;
    if (bucket.loggedAt !== undefined && now - bucket.loggedAt < this.windowMs) return 0;
    const count = bucket.refused;
    bucket.refused = 0;
    bucket.loggedAt = now;
    return count;
  }

  private current(key: string, now: number): Bucket | undefined {
    const bucket = this.buckets.get(key);
    if (!bucket) return undefined;
    bucket.tokens = Math.min(this.limit, bucket.tokens + ((now - bucket.at) * this.limit) / this.windowMs);
    bucket.at = now;
    return this.forgetIfIdle(key, bucket, now) ? undefined : bucket;
  }

  /** A full bucket whose log line (if any) is a window old holds nothing worth keeping. */
  private forgetIfIdle(key: string, bucket: Bucket, now: number): boolean {
    const idle = bucket.tokens >= this.limit && (bucket.loggedAt === undefined || now - bucket.loggedAt >= this.windowMs);
    if (idle) this.buckets.delete(key);
    return idle;
  }
}
