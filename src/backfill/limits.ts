import { RateLimit } from '../events/webhooks/rate-limit.ts';

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

/** The rows-a-second pace of each account's backfills in this process, kept while a backfill runs. */
export class AccountPaces {
  private readonly paces = new Map<string, { limit: RateLimit; users: number }>();

  constructor(private readonly rowsPerSecond: number) {}

  /** The account's pace for a running backfill; `release` when it ends. */
  acquire(accountId: string): { pace: RateLimit; release(): void } {
    let entry = this.paces.get(accountId);
    if (!entry) this.paces.set(accountId, (entry = { limit: new RateLimit(this.rowsPerSecond), users: 0 }));
    entry.users += 1;
    const held = entry;
    let released = false;
    return {
      pace: held.limit,
      release: () => {
        if (released) return;
        released = true;
        held.users -= 1;
        if (held.users === 0 && this.paces.get(accountId) === held) this.paces.delete(accountId);
      },
    };
  }
}
