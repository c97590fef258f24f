/** Gives back what `acquire` or `tryAcquire` took; calling it again does nothing. */
export type Release = () => void;

interface Holders {
  count: number;
  /** Who waits for a place, first come first served. */
  waiting: Array<() => void>;
}

/**
 * At most `limit` holders per key (an account) at once, in this process. `tryAcquire` refuses
 * past the limit; `acquire` waits in line. A key with no holder and no one waiting is forgotten,
 * so the map holds only the accounts busy right now.
 */
export class KeyedLimit {
  private readonly keys = new Map<string, Holders>();

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`a per-account limit must be a whole number of at least 1, got ${limit}`);
  }

  /** How many hold `key` now. */
  held(key: string): number {
    return this.keys.get(key)?.count ?? 0;
  }

  /** A place for `key`, or undefined when it already holds `limit`. */
  tryAcquire(key: string): Release | undefined {
    const holders = this.holders(key);
    if (holders.count >= this.limit) return undefined;
    holders.count++;
    return this.releaser(key, holders);
  }

  /** A place for `key`, once one is free. */
  acquire(key: string): Promise<Release> {
    const now = this.tryAcquire(key);
    if (now) return Promise.resolve(now);
    const holders = this.holders(key);
    return new Promise((resolve) => holders.waiting.push(() => resolve(this.releaser(key, holders))));
  }

  private holders(key: string): Holders {
    let holders = this.keys.get(key);
    if (!holders) {
      holders = { count: 0, waiting: [] };
      this.keys.set(key, holders);
    }
    return holders;
  }

  private releaser(key: string, holders: Holders): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = holders.waiting.shift();
      // The place passes straight to the next in line: the count stays.
      if (next) return next();
      holders.count--;
      if (holders.count === 0) this.keys.delete(key);
    };
  }
}
