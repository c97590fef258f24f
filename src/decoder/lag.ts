import type pg from 'pg';
import { withClient } from '../db/sql.ts';

/**
 * Writes to decoder_progress how far the sync database's WAL is ahead of what its slot was
 * told (`ackedLsn`), for the sync's status and the metrics.
 */
export async function reportSlotLag(options: { syncIds: string[]; slot: string; databaseUrl: string; control: pg.Pool }, ackedLsn: string): Promise<void> {
  const lag = await withClient(options.databaseUrl, async (client) => {
    const { rows } = await client.query<{ lag: string | null }>(
      'SELECT greatest(0, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn))::bigint AS lag FROM pg_replication_slots WHERE slot_name = $1',
      [options.slot],
    );
    return rows[0]?.lag ?? null;
  });
  // Every sync of the database reads through the one slot: each is as far behind as it.
  await options.control.query('UPDATE decoder_progress SET acked_lsn = $2, slot_lag_bytes = $3, lag_at = now() WHERE sync_id = ANY($1)', [
    options.syncIds,
    ackedLsn,
    lag,
  ]);
}
