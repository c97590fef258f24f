/**
 * The fake's time. Everything that ages (event retention, idempotency keys, subscription
 * periods, `created`) reads it, so tests can move time forward instead of waiting.
 */
export class Clock {
  private offsetMs = 0;

  constructor(private readonly base: () => number = Date.now) {}

  /** Milliseconds since the epoch. */
  nowMs(): number {
    return this.base() + this.offsetMs;
  }

  /** Unix seconds, Stripe's unit for every timestamp. */
  now(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  advance(ms: number): void {
    if (!(ms >= 0)) throw new Error('the clock only moves forward');
    this.offsetMs += ms;
  }
}
