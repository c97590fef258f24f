import { type Counts, CountsByKey, RefusalLog } from '../shared/stats.ts';

export type { Counts } from '../shared/stats.ts';

/** Request counters: overall, per URL path (no query) and per account. */
export class Stats {
  requests = 0;
  rateLimited = 0;
  private readonly perPath = new CountsByKey();
  private readonly perAccount = new CountsByKey();
  /** Connect: requests made on behalf of a connected account (`Stripe-Account`), by it and path. */
  private readonly perActing = new CountsByKey();
  readonly refusals = new RefusalLog();

  request(path: string): void {
    this.requests++;
    this.perPath.add(path, { requests: 1 });
  }

  /** Counted once the request's account is known (after authentication). */
  account(accountId: string, limited: boolean): void {
    this.perAccount.add(accountId, { requests: 1, rateLimited: limited ? 1 : 0 });
    if (limited) this.rateLimited++;
  }

  /** A request a platform made on behalf of a connected account (also counted under the platform). */
  acting(accountId: string, path: string): void {
    this.perActing.add(`${accountId} ${path}`, { requests: 1 });
  }

  /** Requests on behalf of the connected account, to paths starting with `prefix`. */
  byActing(accountId: string, prefix = ''): Counts {
    return this.perActing.sum((key) => key.startsWith(`${accountId} ${prefix}`));
  }

  limitedPath(path: string): void {
    if (this.perPath.has(path)) this.perPath.add(path, { rateLimited: 1 });
  }

  /** Sums every path starting with `prefix` (so '/v1/customers' includes '/v1/customers/cus_…'). */
  byPath(prefix: string): Counts {
    return this.perPath.sum((path) => path.startsWith(prefix));
  }

  /** Every URL path requested, with its counts. */
  paths(): Array<[string, Counts]> {
    return this.perPath.entries();
  }

  byAccount(accountId: string): Counts {
    return this.perAccount.sum((id) => id === accountId);
  }

  reset(): void {
    this.requests = 0;
    this.rateLimited = 0;
    this.perPath.clear();
    this.perAccount.clear();
    this.perActing.clear();
    this.refusals.clear();
  }
}
