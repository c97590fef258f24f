/**
 * The fake's time. Everything that ages (event retention, idempotency keys, subscription
 * periods, `created`) reads it, so tests can move time forward instead of waiting.
 */
export class Clock {
  private offsetMs = 0;
  /** While set, `now()` stays at this second (see holdSecond). */
  private held: number | undefined;

  constructor(private readonly base: () => number = Date.now) {}

  /** Milliseconds since the epoch. */
  nowMs(): number {
    return this.base() + this.offsetMs;
  }

  /** Unix seconds, Stripe's unit for every timestamp. */
  now(): number {
    return this.held ?? Math.floor(this.nowMs() / 1000);
  }

  /**
   * Until `releaseSecond()`, every `created` (objects, events) is this second, however long the
   * changes in between take: two changes of one object become two events of one second, as
   * Stripe makes when they come fast. Milliseconds (rate limits, idempotency) run on.
   */
  holdSecond(): number {
    this.held ??= Math.floor(this.nowMs() / 1000);
    return this.held;
  }

  releaseSecond(): void {
    this.held = undefined;
  }

  advance(ms: number): void {
    if (!(ms >= 0)) throw new Error('the clock only moves forward');
    this.offsetMs += ms;
  }
}
