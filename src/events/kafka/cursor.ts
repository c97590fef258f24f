import type pg from 'pg';

/**
 * The relay's durable cursor (sql/7_kafka_relay.sql): the seq of the last event of a sync
 * that Kafka has acknowledged. Seqs travel as decimal strings, like the event log's.
 */

/** The last relayed seq of a sync; '0' before the first event (seqs start at 1). */
export async function loadRelayCursor(pool: pg.Pool, syncId: string): Promise<string> {
  const { rows } = await pool.query<{ seq: string }>('SELECT seq::text AS seq FROM kafka_relay_cursors WHERE sync_id = $1', [syncId]);
  return rows[0]?.seq ?? '0';
}

/**
 * Moves the cursor forward to `seq`; never back, so a relay that lost a race with another
 * one (two processes briefly relaying the same sync) cannot rewind it. Returns the cursor
 * as stored afterwards.
 */
export async function advanceRelayCursor(pool: pg.Pool, syncId: string, seq: string): Promise<string> {
  const { rows } = await pool.query<{ seq: string }>(
    `INSERT INTO kafka_relay_cursors (sync_id, seq, updated_at) VALUES ($1, $2, now())
     ON CONFLICT (sync_id) DO UPDATE SET seq = greatest(kafka_relay_cursors.seq, excluded.seq), updated_at = now()
     RETURNING seq::text AS seq`,
    [syncId, seq],
  );
  return rows[0]!.seq;
}

/** Forgets a sync's cursor (the sync is gone). */
export async function deleteRelayCursor(pool: pg.Pool, syncId: string): Promise<void> {
  await pool.query('DELETE FROM kafka_relay_cursors WHERE sync_id = $1', [syncId]);
}
