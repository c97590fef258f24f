/**
 * Airtable's limiter: a sliding one-second window per key; a key that goes over it is locked
 * out (every request 429) for `lockoutMs`.
 */
export class SlidingWindowLimiter {
  private readonly hits = new Map<string, number[]>();
  private readonly lockedUntil = new Map<string, number>();

  constructor(
    private readonly perSecond: number,
    private readonly lockoutMs: number,
  ) {}

  /** Records a request; false when the key is (or now becomes) locked out. */
  allow(key: string, now: number): boolean {
    const until = this.lockedUntil.get(key);
    if (until !== undefined) {
      if (now < until) return false;
      this.lockedUntil.delete(key);
      this.hits.delete(key);
    }
    let window = this.hits.get(key);
    if (!window) this.hits.set(key, (window = []));
    while (window.length > 0 && (window[0] as number) <= now - 1000) window.shift();
    if (window.length >= this.perSecond) {
      this.lockedUntil.set(key, now + this.lockoutMs);
      return false;
    }
    window.push(now);
    return true;
  }

  reset(): void {
    this.hits.clear();
    this.lockedUntil.clear();
  }
}
