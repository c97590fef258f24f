interface Entry<V> {
  value: Promise<V>;
  /** When the answer stops being fresh; Infinity while it is being read. */
  until: number;
}

/**
 * One read per key at a time, its answer kept `freshMs` after it arrived: requests that come
 * while it runs, or soon after, share it (single flight). A failed read is not kept.
 */
export class SharedReads<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(private readonly options: { freshMs: number; maxEntries?: number }) {}

  get(key: string, read: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && hit.until > now) return hit.value;
    if (this.entries.size >= (this.options.maxEntries ?? 10_000)) this.dropStale(now);
    const entry: Entry<V> = { value: read(), until: Number.POSITIVE_INFINITY };
    this.entries.set(key, entry);
    entry.value.then(
      () => {
        entry.until = Date.now() + this.options.freshMs;
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return entry.value;
  }

  /** Forgets `key` (its sync was deleted); a read in flight still answers its callers. */
  forget(key: string): void {
    this.entries.delete(key);
  }

  private dropStale(now: number): void {
    for (const [key, entry] of this.entries) if (entry.until <= now) this.entries.delete(key);
  }
}
