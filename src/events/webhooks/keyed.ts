/**
 * One shared value per key (a destination host, an account), made on first use and forgotten
 * once no holder is left, so keys that come and go leave nothing behind.
 */
export class Keyed<T> {
  private readonly entries = new Map<string, { value: T; users: number }>();

  constructor(private readonly make: () => T) {}

  /** The key's value; `release` once the holder stops (a second call does nothing). */
  acquire(key: string): { value: T; release(): void } {
    let entry = this.entries.get(key);
    if (!entry) this.entries.set(key, (entry = { value: this.make(), users: 0 }));
    entry.users += 1;
    const taken = entry;
    let released = false;
    return {
      value: taken.value,
      release: () => {
        if (released) return;
        released = true;
        taken.users -= 1;
        if (taken.users === 0 && this.entries.get(key) === taken) this.entries.delete(key);
      },
    };
  }
}
