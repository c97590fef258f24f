type Wake = () => void;

/**
 * Per-key counters with waiters: `bump(key)` wakes whoever waits on the key. To wait without
 * missing a bump that lands between a check and the wait, take `mark(key)` before checking
 * and pass it to `since`.
 */
export class Wakeups {
  private readonly counters = new Map<string, number>();
  private readonly waiting = new Map<string, Set<Wake>>();

  bump(key: string): void {
    this.counters.set(key, (this.counters.get(key) ?? 0) + 1);
    for (const wake of this.waiting.get(key) ?? []) wake();
  }

  /** Every key that someone waits on: after a lost connection, when bumps may have been missed. */
  bumpWaiting(): void {
    for (const key of [...this.waiting.keys()]) this.bump(key);
  }

  mark(key: string): number {
    return this.counters.get(key) ?? 0;
  }

  /** True once the key was bumped after `mark` (at once if it already was); false on timeout or abort. */
  since(key: string, mark: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.mark(key) !== mark) return Promise.resolve(true);
    if (timeoutMs <= 0 || signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const set = this.waiting.get(key) ?? new Set<Wake>();
      this.waiting.set(key, set);
      const done = (bumped: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        set.delete(wake);
        if (set.size === 0 && this.waiting.get(key) === set) this.waiting.delete(key);
        resolve(bumped);
      };
      const wake: Wake = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      set.add(wake);
    });
  }
}
