import { TributaryError } from '../errors.ts';
import { type Backoff, retry, type RetryOptions } from '../retry.ts';

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
    if (code === DISK_FULL) return true; // out of disk space: a write may succeed once space is freed
    if (code === '40001' || code === '40P01' || code === '55P03') return true; // serialization, deadlock, lock timeout
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'].includes(code)) return true;
  }
  const message = error instanceof Error ? error.message : '';
  // node-postgres reports a socket closed under it, a pool connect that timed out, or a
  // statement past its client-side deadline (a hung path), without a code.
  return /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|the database system is (starting up|shutting down|in recovery mode)/.test(
    message,
  );
}

/** SQLSTATE disk_full: the server could not extend a file. */
const DISK_FULL = '53100';

/** The error, or one it was caused by, is a server out of disk space. */
export function isDiskFull(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === DISK_FULL) return true;
  }
  return false;
}

/** How long a client is asked to wait (Retry-After) when a database a request needs is away. */
export const AWAY_RETRY_AFTER_S = 2;

/**
 * A request that failed because a database it needs is away (the control database, or a
 * sync's server, down or restarting): a 503 with Retry-After that says so, not a 500. Lock
 * and serialization conflicts are not "away" and keep their own handling.
 */
export function databaseAway(error: unknown): TributaryError | undefined {
  if (error instanceof TributaryError || !isTransientDbError(error)) return undefined;
  const code = (error as { code?: unknown }).code;
  if (code === '40001' || code === '40P01' || code === '55P03') return undefined;
  const why = isDiskFull(error) ? 'is out of disk space' : 'is unreachable for now';
  return new TributaryError('unavailable', `a database this request needs ${why}; try again shortly`, {
    cause: error,
    expose: true,
    retryAfterSeconds: AWAY_RETRY_AFTER_S,
  });
}

/** The wait between attempts at a database that is away: 200 ms, doubling to 2 s. */
export const DATABASE_BACKOFF: Backoff = { initialMs: 200, maxMs: 2000 };

/**
 * Runs `work` again while it fails with a transient database error, with growing pauses,
 * for at most `patienceMs`. Other errors, and the last transient one, are thrown. `work`
 * must be safe to repeat (an upsert, an idempotent write).
 */
export function retryTransient<T>(work: () => Promise<T>, options: Omit<RetryOptions, 'backoff' | 'classify'> & { patienceMs: number }): Promise<T> {
  return retry(work, { ...options, backoff: DATABASE_BACKOFF, classify: (error) => (isTransientDbError(error) ? 'retry' : 'fatal') });
}
