/**
 * What one account's backfills may do. Each read becomes an event kept in the shared log for
 * its retention (a week by default), so without them two tiny syncs with a backfill posted
 * every 0.1 s grew the log by 1.4 MB a second. Reads meant for one webhook count the same.
 */
export interface BackfillLimits {
  /** Backfills an account may ask for in any hour; past it a create is a 429. */
  perHour: number;
  /** Rows an account's backfills may read in any day; past it a create is a 429 and a running one stops, failed. */
  rowsPerDay: number;
  /** Rows a second an account's backfills read, together, in one process. */
  rowsPerSecond: number;
}

export const DEFAULT_BACKFILL_LIMITS: BackfillLimits = { perHour: 60, rowsPerDay: 1_000_000, rowsPerSecond: 50_000 };
