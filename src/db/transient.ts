import { pause } from '../time.ts';

/**
 * Errors that say the database is away for now, not that the statement is wrong: the
 * server refusing or dropping connections (restart, failover, crash recovery, full
 * connection slots), a pool that could not connect in time, or a lock or serialization
 * conflict. The same statement may well succeed a moment later.
 */
export function isTransientDbError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (code.startsWith('08')) return true; // connection exception
    if (code === '57P01' || code === '57P02' || code === '57P03') return true; // admin or crash shutdown, cannot connect now
    if (code === '53300' || code === '53400') return true; // too many connections, configuration limit
    if (code === '40001' || code === '40P01' || code === '55P03') return true; // serialization, deadlock, lock timeout
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) return true;
  }
  const message = error instanceof Error ? error.message : '';
  // node-postgres reports a socket closed under it, or a pool connect that timed out, without a code.
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|the database system is (starting up|shutting down|in recovery mode)/.test(
    message,
  );
}

export interface RetryTransientOptions {
  /** Give up (rethrow the last error) once this much time has passed since the first attempt. */
  patienceMs: number;
  /** First pause; it doubles up to maxPauseMs, with jitter. */
  firstPauseMs?: number;
  maxPauseMs?: number;
  signal?: AbortSignal;
  /** Told of each transient failure before its pause. */
  onRetry?(error: unknown, attempt: number): void;
}

/**
 * Runs `work` again while it fails with a transient database error, with growing pauses,
 * for at most `patienceMs`. Other errors, and the last transient one, are thrown. `work`
 * must be safe to repeat (an upsert, an idempotent write).
 */
export async function retryTransient<T>(work: () => Promise<T>, options: RetryTransientOptions): Promise<T> {
  const deadline = Date.now() + options.patienceMs;
  const maxPause = options.maxPauseMs ?? 2000;
  let wait = options.firstPauseMs ?? 200;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const left = deadline - Date.now();
      if (!isTransientDbError(error) || left <= 0 || options.signal?.aborted) throw error;
      options.onRetry?.(error, attempt);
      await pause(Math.min(left, wait * (0.75 + Math.random() / 2)), options.signal);
      wait = Math.min(maxPause, wait * 2);
    }
  }
}
