import { createHash } from 'node:crypto';

/**
 * Per-record order: every event of a record goes through the same lane, and a lane
 * delivers one event at a time, in log order. The lane of a record is the first 32 bits
 * of md5(record id) modulo the lane count, computed the same way in SQL (LANE_SQL) so
 * that queued rows can be moved when the lane count changes.
 */
export function laneOf(recordId: string, lanes: number): number {
  return createHash('md5').update(recordId, 'utf8').digest().readUInt32BE(0) % lanes;
}

/** The same as laneOf, as an SQL expression over a text column and an int parameter. */
export const LANE_SQL = (column: string, lanes: string) =>
  `((('x' || substr(md5(${column}), 1, 8))::bit(32)::bigint % ${lanes}::int)::int)`;
