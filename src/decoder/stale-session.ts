import { withClient } from '../db/sql.ts';
import type { IdlePools } from '../db/idle-pools.ts';

/**
 * Ends the server process of this decoder's own earlier session, given up as hung. Over a
 * path that hangs, the server learns of it only when its `wal_sender_timeout` runs out (60 s
 * by default; some hosts turn it off), and until then its WAL sender holds the slot: every new
 * session is refused ("replication slot … is active for PID …"). Only that process is ended,
 * and only while it still holds the slot: one that another holder started is left alone.
 * Resolves once the process no longer holds the slot; rejects while the server cannot be asked.
 */
export async function endStaleSession(options: { databaseUrl: string; slot: string; pools?: IdlePools }, pid: number): Promise<void> {
  const end = async (client: { query: (text: string, values: unknown[]) => Promise<unknown> }) =>
    client.query('SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid = $2', [options.slot, pid]);
  const pool = options.pools?.get(options.databaseUrl);
  if (pool) await end(pool);
  else await withClient(options.databaseUrl, end);
}
