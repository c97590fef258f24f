/**
 * An account without events for IDLE_AFTER_MS is read less often: each empty read doubles the
 * gap, up to IDLE_POLL_MAX_MS. An event brings the normal pace back; a wait request is served
 * at once whatever the gap. A machine holds hundreds of idle accounts this way
 * (docs/performance.md#many-syncs-on-one-machine).
 */
export const IDLE_AFTER_MS = 30_000;
export const IDLE_POLL_MAX_MS = 4_000;
/** The gap before the feed's next read: the normal interval, or longer for an idle account. */
export function nextPollGap(options: { intervalMs: number; previousGapMs: number; sinceEventMs: number }): number {
  if (options.sinceEventMs < IDLE_AFTER_MS) return options.intervalMs;
  return Math.max(options.intervalMs, Math.min(IDLE_POLL_MAX_MS, options.previousGapMs * 2));
}
