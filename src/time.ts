/**
 * Waits `ms`, or less if `signal` aborts first. Never rejects: a caller that must stop on
 * abort checks the signal afterwards (`signal.throwIfAborted()`).
 */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Thrown by within() when the work outlived its deadline. */
export class DeadlinePassed extends Error {
  constructor(what: string, ms: number) {
    super(`${what}: no answer within ${Math.round(ms / 1000)} s`);
    this.name = 'DeadlinePassed';
  }
}

/**
 * `work`, or a DeadlinePassed after `ms`: for a client whose own timeouts do not cover a path
 * that hangs without closing. The work itself goes on; its caller drops what it was using.
 */
export function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlinePassed(what, ms)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
