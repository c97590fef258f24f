/** Small waiting helpers for the deliverer's loops. */

/** Thrown out of a loop's bookkeeping when its worker was asked to stop. */
export class Stopped extends Error {
  constructor() {
    super('stopped');
    this.name = 'Stopped';
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A wakeup for loops in this process. A waiter registers synchronously when it calls
 * wait(), so checking a condition and then waiting in the same tick never misses a notify.
 * Once closed (its owner stopping), every wait resolves at once: the owner closes its
 * notifiers on abort, rather than each wait listening to the abort signal.
 */
export class Notifier {
  private readonly waiters = new Set<() => void>();
  private closed = false;

  notify(): void {
    if (this.waiters.size === 0) return;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  /** Wakes every waiter, now and from now on. */
  close(): void {
    this.closed = true;
    this.notify();
  }

  /** Resolves on the next notify, after `timeoutMs`, or once closed. */
  wait(timeoutMs: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
    });
  }
}
