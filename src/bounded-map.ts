/**
 * Drops a Map's first entries until it holds at most `max`. A Map keeps insertion order, so
 * these are the oldest; a caller that deletes a key before setting it again keeps them in order
 * of last use instead. The one bound of every in-memory cache here.
 */
export function trimOldest(map: Map<unknown, unknown>, max: number): void {
  while (map.size > max) map.delete(map.keys().next().value);
}

/**
 * Values looked up lately, each with when: a lookup that may be a little stale costs no query
 * while it is fresh. How fresh is the caller's to say per value (an unknown id may be worth
 * asking again sooner than a known one). At most `max` kept, the least recently read going first.
 */
export class ReadLately<V> {
  private readonly entries = new Map<string, { at: number; value: V }>();

  constructor(private readonly max: number) {}

  async get(key: string, freshForMs: (value: V) => number, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && Date.now() - hit.at < freshForMs(hit.value)) return hit.value;
    const value = await load();
    this.entries.delete(key);
    this.entries.set(key, { at: Date.now(), value });
    trimOldest(this.entries, this.max);
    return value;
  }
}
