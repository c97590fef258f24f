import crypto from 'node:crypto';

/**
 * Per-record order: every event of a record goes through the same webhook lane, and a lane
 * delivers one event at a time, in log order. The lane of a record is the first 32 bits of
 * md5(record id) modulo the lane count, computed the same way in SQL (LANE_SQL), so that a
 * lane can read its own events from the log and queued rows can be moved when the lane count
 * changes.
 */
export function laneOf(recordId: string, lanes: number): number {
  return md5(recordId).readUInt32BE(0) % lanes;
}

// The one-shot crypto.hash (Node 20.12 and later) costs less than a Hash object per event.
const md5: (text: string) => Buffer =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('md5', text, 'buffer') : (text) => crypto.createHash('md5').update(text, 'utf8').digest();

/** The same as laneOf, as an SQL expression over a text column and an int parameter. */
export const LANE_SQL = (column: string, lanes: string) => `((('x' || substr(md5(${column}), 1, 8))::bit(32)::bigint % ${lanes}::int)::int)`;
