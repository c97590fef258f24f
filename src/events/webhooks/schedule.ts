import { backoffDelay } from '../../retry.ts';

/**
 * When a failed delivery is tried again. Exponential back-off with full jitter: the wait
 * before attempt n+1 is uniform in [0, min(maxDelayMs, initialDelayMs * factor^(n-1))].
 *
 * A delivery is exhausted when it has failed `maxAttempts` times, or when its lane has
 * been failing without a single success for `maxAgeMs` (so a destination that is down
 * for longer than that drains its backlog into the exhausted list at one attempt per
 * event, instead of spending another `maxAgeMs` on each one).
 */
export interface RetrySchedule {
  initialDelayMs: number;
  factor: number;
  maxDelayMs: number;
  maxAttempts: number;
  maxAgeMs: number;
  /** One attempt's limit: connect, send and the response headers and (bounded) body. */
  timeoutMs: number;
}

export const DEFAULT_SCHEDULE: RetrySchedule = {
  initialDelayMs: 1_000,
  factor: 2,
  maxDelayMs: 3_600_000,
  maxAttempts: 50,
  maxAgeMs: 86_400_000,
  timeoutMs: 10_000,
};

export function retrySchedule(overrides: Partial<RetrySchedule> = {}): RetrySchedule {
  const schedule = { ...DEFAULT_SCHEDULE, ...overrides };
  for (const [name, value] of Object.entries(schedule)) {
    if (!(typeof value === 'number' && value >= 0 && !Number.isNaN(value))) throw new Error(`schedule.${name} must be a number ≥ 0`);
  }
  if (schedule.maxAttempts < 1) throw new Error('schedule.maxAttempts must be at least 1');
  return schedule;
}

/** The wait after `failures` failed attempts (1 = after the first). */
export function retryDelay(schedule: RetrySchedule, failures: number, random: () => number = Math.random): number {
  return backoffDelay({ initialMs: schedule.initialDelayMs, maxMs: schedule.maxDelayMs, factor: schedule.factor, jitter: 'full' }, failures, random);
}

/** Whether a delivery that has just failed for the `failures`-th time is given up on. */
export function isExhausted(schedule: RetrySchedule, failures: number, failingSinceMs: number, now = Date.now()): boolean {
  return failures >= schedule.maxAttempts || now - failingSinceMs >= schedule.maxAgeMs;
}

/**
 * The least wait a failed attempt's answer asks for: its Retry-After on a 429 or a 503, capped
 * at maxDelayMs (a receiver cannot park a delivery for longer than the back-off would).
 */
export function retryAfterFloor(schedule: RetrySchedule, statusCode: number | undefined, retryAfterMs: number | undefined): number {
  if (retryAfterMs === undefined || (statusCode !== 429 && statusCode !== 503)) return 0;
  return Math.min(retryAfterMs, schedule.maxDelayMs);
}
