import type pg from 'pg';

/** The error pg gives a statement that outlived its client-side deadline (query_timeout). */
const QUERY_TIMEOUT = 'Query read timeout';

/** What of pg-pool's inside this reaches: its idle connections, and how it removes one. */
interface PoolInside {
  _idle?: Array<{ client: pg.PoolClient }>;
  _remove?: (client: pg.PoolClient) => void;
}

/**
 * Once a statement outlives its deadline (most likely a path that hung without closing), the
 * pool's idle connections, made over the same path, are likely dead too; kept, each would
 * cost its next user a whole deadline (a sync's is 5 min), one cycle at a time, with back-off
 * between (sync.hung-path.test: four dead connections held a sync for minutes after its path
 * healed). They are dropped at once instead, and the next statements connect anew, within
 * the connect deadline. pg-pool offers no public way to drop idle connections: this reaches
 * its idle list, and does nothing where that is not there.
 */
export function dropIdleAfterTimeout(pool: pg.Pool): void {
  pool.on('release', (err: Error | undefined) => {
    if (err?.message !== QUERY_TIMEOUT) return;
    const inside = pool as unknown as PoolInside;
    if (!Array.isArray(inside._idle) || typeof inside._remove !== 'function') return;
    for (const { client } of [...inside._idle]) inside._remove.call(pool, client);
  });
}
