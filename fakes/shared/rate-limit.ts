/**
 * A sliding one-second window per key. Airtable locks a key out (every request 429) for
 * `lockoutMs` once it goes over; Stripe has no lockout (`lockoutMs` 0): only the requests past
 * the window's allowance fail.
 */
export class SlidingWindowLimiter {
  private readonly hits = new Map<string, number[]>();
  private readonly lockedUntil = new Map<string, number>();

  constructor(
    private readonly perSecond: number,
    private readonly lockoutMs = 0,
  ) {}

  /**
   * Records a request that arrived at `now`; false when the key is over its allowance (or
   * locked out). Requests may be handled slightly out of arrival order, so the window
   * counts the hits of the second before `now`, not simply the newest ones.
   */
  allow(key: string, now: number): boolean {
    const until = this.lockedUntil.get(key);
    if (until !== undefined) {
      if (now < until) return false;
      this.lockedUntil.delete(key);
      this.hits.delete(key);
    }
    let window = this.hits.get(key);
    if (!window) this.hits.set(key, (window = []));
    while (window.length > 0 && (window[0] as number) <= now - 2000) window.shift();
    let inWindow = 0;
    for (const t of window) if (t > now - 1000 && t <= now) inWindow++;
    if (inWindow >= this.perSecond) {
      if (this.lockoutMs > 0) this.lockedUntil.set(key, now + this.lockoutMs);
      return false;
    }
    // Kept in arrival order: the front is always the oldest.
    let at = window.length;
    while (at > 0 && (window[at - 1] as number) > now) at--;
    window.splice(at, 0, now);
    return true;
  }

  reset(): void {
    this.hits.clear();
    this.lockedUntil.clear();
  }
}
