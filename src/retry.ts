import { pause } from './time.ts';

/**
 * The one retry policy of the service: how long to wait after failures, and a loop that
 * classifies each failure, waits, and gives up on fatal ones. Every loop that retries (sync
 * runners, upstream clients, the proxy's write-through, event relays and deliverers) draws
 * its delays from here, with its own numbers.
 */
export interface Backoff {
  /** The wait after the first failure, before jitter. */
  initialMs: number;
  /** The longest wait, before jitter. */
  maxMs: number;
  /** Growth per failure; default 2. */
  factor?: number;
  /**
   * How the wait is spread so that many loops do not retry in lockstep: `full` anywhere in
   * [0, ceiling] (deliveries to one receiver), `upper` in [ceiling/2, ceiling], `spread` within
   * ±25 % of the ceiling (default), `none` exactly the ceiling.
   */
  jitter?: 'full' | 'upper' | 'spread' | 'none';
}

/** The wait after `failures` failures in a row (1 = after the first). */
export function backoffDelay(backoff: Backoff, failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(backoff.maxMs, backoff.initialMs * (backoff.factor ?? 2) ** Math.max(0, failures - 1));
  switch (backoff.jitter ?? 'spread') {
    case 'full':
      return Math.floor(random() * ceiling);
    case 'upper':
      return ceiling / 2 + random() * (ceiling / 2);
    case 'none':
      return ceiling;
    case 'spread':
      return Math.min(backoff.maxMs, ceiling * (0.75 + random() / 2));
  }
}

/** A loop's failures in a row and the wait each one earns. */
export class FailureCount {
  private failures = 0;

  constructor(private readonly backoff: Backoff) {}

  /** One more failure: the wait it earns. */
  next(): number {
    this.failures++;
    return backoffDelay(this.backoff, this.failures);
  }

  /** A success: the next failure waits the least again. */
  reset(): void {
    this.failures = 0;
  }

  get count(): number {
    return this.failures;
  }
}

export interface RetryOptions {
  backoff: Backoff;
  /** `fatal` rethrows at once; default: every failure is worth another try. */
  classify?(error: unknown): 'retry' | 'fatal';
  /** Give up (rethrow the last error) once this much time has passed since the first attempt. */
  patienceMs?: number;
  /** Stops the waiting: the last error is rethrown. */
  signal?: AbortSignal;
  /** Told of each failure that will be tried again, before its wait. */
  onRetry?(error: unknown, attempt: number): void;
}

/**
 * Runs `work` until it succeeds, waiting between failures as the back-off says. Rethrows a
 * fatal error, the last one once patience runs out, or the last one when `signal` aborts.
 * `work` must be safe to repeat.
 */
export async function retry<T>(work: () => Promise<T>, options: RetryOptions): Promise<T> {
  const deadline = options.patienceMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.patienceMs;
  const failures = new FailureCount(options.backoff);
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const left = deadline - Date.now();
      if (options.classify?.(error) === 'fatal' || left <= 0 || options.signal?.aborted) throw error;
      options.onRetry?.(error, attempt);
      await pause(Math.min(left, failures.next()), options.signal);
      if (options.signal?.aborted) throw error;
    }
  }
}

/** A sync's cycle that failed: 2 s doubling to 60 s before the next one. */
export const CYCLE_BACKOFF: Backoff = { initialMs: 2000, maxMs: 60_000 };

/** A sync whose key was refused: the next try waits this long (the user may fix the key). */
export const FATAL_PAUSE_MS = 60_000;
