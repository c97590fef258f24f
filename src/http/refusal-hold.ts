import { TributaryError } from '../errors.ts';
import { pause } from '../time.ts';

/**
 * How long a 429 for a per-account cap or a failed-credential throttle is held before it is
 * sent: its Retry-After, at most a second. A client that ignores Retry-After and sends its
 * refused request again at once (a flood) would otherwise have the service refuse thousands a
 * second, and that refusing alone took the CPU other tenants needed. Held, a thousand requests
 * in flight cost a thousand refusals a second, each a timer and an open socket meanwhile.
 * A client that honours Retry-After loses nothing: it would have waited that long anyway.
 */
export const MAX_REFUSAL_HOLD_MS = 1000;

/** Waits before a refusal goes out, if it is a 429 that says when to come back; `signal`: the client went away. */
export function holdRefusal(error: unknown, signal?: AbortSignal): Promise<void> {
  if (!(error instanceof TributaryError) || error.code !== 'too_many_requests' || error.retryAfterSeconds === undefined) return Promise.resolve();
  return pause(Math.min(MAX_REFUSAL_HOLD_MS, error.retryAfterSeconds * 1000), signal);
}
