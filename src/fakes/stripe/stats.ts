export interface Counts {
  requests: number;
  rateLimited: number;
}

/** Request counters: overall, per URL path (no query) and per account. */
export class Stats {
  requests = 0;
  rateLimited = 0;
  private readonly perPath = new Map<string, Counts>();
  private readonly perAccount = new Map<string, Counts>();

  private static bump(map: Map<string, Counts>, key: string, limited: boolean): void {
    let c = map.get(key);
    if (!c) map.set(key, (c = { requests: 0, rateLimited: 0 }));
    c.requests++;
    if (limited) c.rateLimited++;
  }

  request(path: string): void {
    this.requests++;
    Stats.bump(this.perPath, path, false);
  }

  /** Counted once the request's account is known (after authentication). */
  account(accountId: string, limited: boolean): void {
    Stats.bump(this.perAccount, accountId, limited);
    if (!limited) return;
    this.rateLimited++;
  }

  limitedPath(path: string): void {
    const c = this.perPath.get(path);
    if (c) c.rateLimited++;
  }

  /** Sums every path starting with `prefix` (so '/v1/customers' includes '/v1/customers/cus_…'). */
  byPath(prefix: string): Counts {
    const out = { requests: 0, rateLimited: 0 };
    for (const [path, c] of this.perPath) {
      if (!path.startsWith(prefix)) continue;
      out.requests += c.requests;
      out.rateLimited += c.rateLimited;
    }
    return out;
  }

  byAccount(accountId: string): Counts {
    const c = this.perAccount.get(accountId);
    return { requests: c?.requests ?? 0, rateLimited: c?.rateLimited ?? 0 };
  }

  reset(): void {
    this.requests = 0;
    this.rateLimited = 0;
    this.perPath.clear();
    this.perAccount.clear();
  }
}
