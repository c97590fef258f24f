/** Knobs of the deliverer; the defaults suit production. */
export interface DelivererTuning {
  /**
   * Serial lanes per destination: the most requests in flight to one destination. A lane's
   * throughput is one event per round trip, so a destination gets at most lanes / round trip:
   * 128 lanes carry 2,000 events/s while round trips stay under 64 ms.
   */
  lanes: number;
  /** Events held in memory per destination (read ahead, or waiting to be parked). */
  maxPending: number;
  /** How often parked events and the cursor are written. */
  flushMs: number;
  /** The longest a loop sleeps without a wakeup before it looks again. */
  idleMs: number;
  /** Events read from the log at once. */
  readBatch: number;
  /** Queued rows a lane loads at once. */
  queuePage: number;
  /**
   * A destination whose every attempt has failed for this long is disabled
   * (config.webhookDisableAfterMs, TRIBUTARY_WEBHOOK_DISABLE_AFTER_HOURS).
   */
  disableAfterMs: number;
}

export const DEFAULT_TUNING: DelivererTuning = {
  lanes: 128,
  maxPending: 10_000,
  flushMs: 100,
  idleMs: 5_000,
  readBatch: 1_000,
  queuePage: 100,
  disableAfterMs: 5 * 86_400_000,
};
