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

  /** Every key with its counts. */
  entries(): Array<[string, Counts]> {
    return [...this.counts].map(([key, c]) => [key, { ...c }]);
  }

  clear(): void {
    this.counts.clear();
  }
}

/** One request as a rate limiter saw it arrive. */
export interface Arrival {
  /** The limited key: an account or a base. */
  key: string;
  at: number;
  method: string;
  path: string;
  agent: string;
}

/** A request refused with 429, and the requests of its key that arrived in the second before it. */
export interface Refusal {
  refused: Arrival;
  before: Arrival[];
}

const RECENT = 400;
const KEPT_REFUSALS = 20;

/**
 * The requests that arrived just before each refusal, by key: enough to tell who overran a
 * limit (the user agent says whether it was a sync or a customer's client).
 */
export class RefusalLog {
  private readonly recent: Arrival[] = [];
  readonly refusals: Refusal[] = [];
  /** Told of every refusal as it happens (a test's log), the first KEPT_REFUSALS or not. */
  onRefusal: ((refusal: Refusal) => void) | undefined;

  arrived(arrival: Arrival): void {
    this.recent.push(arrival);
    if (this.recent.length > RECENT) this.recent.shift();
  }

  refused(arrival: Arrival): void {
    if (this.refusals.length >= KEPT_REFUSALS && !this.onRefusal) return;
    const before = this.recent.filter((a) => a !== arrival && a.key === arrival.key && a.at > arrival.at - 1000 && a.at <= arrival.at);
    if (this.refusals.length < KEPT_REFUSALS) this.refusals.push({ refused: arrival, before });
    this.onRefusal?.({ refused: arrival, before });
  }

  clear(): void {
    this.recent.length = 0;
    this.refusals.length = 0;
  }
}
