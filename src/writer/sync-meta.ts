import type pg from 'pg';
import { liveTable, type SyncSchemas } from '../syncdb/schemas.ts';

/**
 * `_sync_meta` in the sync's schema, the one-row table that tells SQL users when the sync last
 * started and completed a cycle. It is UNLOGGED: it writes no WAL, so no walsender decodes it,
 * and a crash of the server empties it (PostgreSQL truncates unlogged tables in recovery).
 * Each write therefore puts the row back when it is missing.
 */
export async function recordCycleStart(target: pg.Pool, schemas: SyncSchemas, at: Date): Promise<void> {
  const table = liveTable(schemas, '_sync_meta');
  await target.query(
    `WITH u AS (UPDATE ${table} SET started_at = $1 RETURNING 1)
     INSERT INTO ${table} (started_at) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM u)`,
    [at],
  );
}

export async function recordCycleEnd(target: pg.Pool, schemas: SyncSchemas, finished: Date, seconds: number): Promise<void> {
  const table = liveTable(schemas, '_sync_meta');
  await target.query(
    `WITH u AS (UPDATE ${table} SET completed_at = $1, duration_last = make_interval(secs => $2) RETURNING 1)
     INSERT INTO ${table} (completed_at, duration_last) SELECT $1, make_interval(secs => $2) WHERE NOT EXISTS (SELECT 1 FROM u)`,
    [finished, seconds],
  );
}
