export interface Counts {
  requests: number;
  rateLimited: number;
}

/** Request counts by key (a base, a URL path, an account), for tests and benchmarks. */
export class CountsByKey {
  private readonly counts = new Map<string, Counts>();

  add(key: string, counts: Partial<Counts>): void {
    let c = this.counts.get(key);
    if (!c) this.counts.set(key, (c = { requests: 0, rateLimited: 0 }));
    c.requests += counts.requests ?? 0;
    c.rateLimited += counts.rateLimited ?? 0;
  }

  has(key: string): boolean {
    return this.counts.has(key);
  }

  /** The sum over the keys `which` accepts (one key: `(k) => k === key`). */
  sum(which: (key: string) => boolean): Counts {
    const out = { requests: 0, rateLimited: 0 };
    for (const [key, c] of this.counts) {
      if (!which(key)) continue;
      out.requests += c.requests;
      out.rateLimited += c.rateLimited;
    }
    return out;
  }

  clear(): void {
    this.counts.clear();
  }
}
