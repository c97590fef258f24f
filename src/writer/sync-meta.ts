import type pg from 'pg';

/**
 * `public._sync_meta`, the one-row table that tells SQL users when the sync last started and
 * completed a cycle. Written here with the rows, as everything in `public` is.
 */
export async function recordCycleStart(target: pg.Pool, at: Date): Promise<void> {
  await target.query('UPDATE public._sync_meta SET started_at = $1', [at]);
}

export async function recordCycleEnd(target: pg.Pool, finished: Date, seconds: number): Promise<void> {
  await target.query('UPDATE public._sync_meta SET completed_at = $1, duration_last = make_interval(secs => $2)', [finished, seconds]);
}
