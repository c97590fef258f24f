import type pg from 'pg';
import { liveTable, type SyncSchemas } from '../syncdb/schemas.ts';

/**
 * `_sync_meta` in the sync's schema, the one-row table that tells SQL users when the sync last
 * started and completed a cycle. Written here with the rows, as everything readers see is.
 */
export async function recordCycleStart(target: pg.Pool, schemas: SyncSchemas, at: Date): Promise<void> {
  await target.query(`UPDATE ${liveTable(schemas, '_sync_meta')} SET started_at = $1`, [at]);
}

export async function recordCycleEnd(target: pg.Pool, schemas: SyncSchemas, finished: Date, seconds: number): Promise<void> {
  await target.query(`UPDATE ${liveTable(schemas, '_sync_meta')} SET completed_at = $1, duration_last = make_interval(secs => $2)`, [finished, seconds]);
}
