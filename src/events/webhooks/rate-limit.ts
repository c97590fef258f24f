import { Keyed } from './keyed.ts';
import { sleep } from './wait.ts';

/**
 * A destination's max_per_second, across all its lanes: a token bucket that holds a tenth
 * of a second's worth (at least one), so attempts are spread evenly rather than sent in
 * bursts. A lane that finds it empty takes its token ahead and sleeps until it is due, so
 * waiting lanes are served in turn without polling.
 */
export class RateLimit {
  private tokens: number;
  private at = Date.now();

  constructor(private perSecond: number) {
    this.tokens = this.burst;
  }

  private get burst(): number {
    return Math.max(1, Math.floor(this.perSecond / 10));
  }

  /** A new rate from now on (PATCH max_per_second); tokens taken ahead stay taken. */
  set rate(perSecond: number) {
    this.refill();
    this.perSecond = perSecond;
    this.tokens = Math.min(this.tokens, this.burst);
  }

  get rate(): number {
    return this.perSecond;
  }

  /** Resolves when an attempt (or `n` units: rows) may be made, or at once when `signal` aborts. */
  async take(signal: AbortSignal, n = 1): Promise<void> {
    this.refill();
    this.tokens -= n;
    if (this.tokens >= 0) return;
    await sleep(Math.ceil((-this.tokens * 1000) / this.perSecond), signal);
  }

  private refill(): void {
    const now = Date.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.perSecond) / 1000);
    this.at = now;
  }
}

/** One RateLimit per key (an account's backfills), shared by every holder (Keyed). */
export class KeyedRateLimits {
  private readonly keyed: Keyed<RateLimit>;

  constructor(perSecond: number) {
    this.keyed = new Keyed(() => new RateLimit(perSecond));
  }

  /** The key's limit; `release` once the holder stops (a second call does nothing). */
  acquire(key: string): { limit: RateLimit; release(): void } {
    const { value, release } = this.keyed.acquire(key);
    return { limit: value, release };
  }
}
