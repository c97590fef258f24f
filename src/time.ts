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
