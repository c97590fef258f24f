import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import { type Backoff, retry } from '../../retry.ts';
import { Stopped } from './wait.ts';

/** Bookkeeping in the control database: 200 ms doubling to 10 s, until it succeeds or the worker stops. */
const BOOKKEEPING_BACKOFF: Backoff = { initialMs: 200, maxMs: 10_000 };

/** A worker's bookkeeping, retried until it succeeds; Stopped once `signal` aborts. */
export async function bookkeeping<T>(work: () => Promise<T>, signal: AbortSignal, logger: Logger): Promise<T> {
  if (signal.aborted) throw new Stopped();
  try {
    return await retry(work, {
      backoff: BOOKKEEPING_BACKOFF,
      signal,
      onRetry: (error) => logger.warn({ err: toError(error) }, 'webhook bookkeeping failed; retrying'),
    });
  } catch (error) {
    if (signal.aborted) throw new Stopped();
    throw error;
  }
}
