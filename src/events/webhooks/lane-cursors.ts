import type pg from 'pg';
import type { DeliveryLog } from './deliveries.ts';
import type { WorkerDestination } from './destination-settings.ts';
import { type Lane, putBehind } from './lanes.ts';

/** A lane's row in webhook_lanes (sql/29_webhook_lanes.sql). */
export interface LaneCursor {
  lane: number;
  laneCount: number;
  afterSeq: bigint;
  released: boolean;
}

/**
 * The positions of a destination's lanes that read their own events from the log. Written
 * where a lane falls behind (DeliveryLog.park), then once per flush for every lane that moved:
 * one statement, however many events the lanes delivered.
 */
export class LaneCursors {
  constructor(private readonly pool: pg.Pool) {}

  async load(destinationId: string): Promise<LaneCursor[]> {
    const { rows } = await this.pool.query<{ lane: number; lane_count: number; after_seq: string; released: boolean }>(
      'SELECT lane, lane_count, after_seq, released FROM webhook_lanes WHERE destination_id = $1 ORDER BY lane',
      [destinationId],
    );
    return rows.map((row) => ({ lane: row.lane, laneCount: row.lane_count, afterSeq: BigInt(row.after_seq), released: row.released }));
  }

  /**
   * Saves where lanes got to, and drops the rows of released lanes that the destination's
   * cursor has passed (`cursorSeq`, saved already): they say nothing the cursor does not.
   * Answers the lanes whose rows went.
   */
  async save(destinationId: string, generation: string, moved: LaneCursor[], cursorSeq: bigint): Promise<number[]> {
    // A released lane the cursor has passed goes; the others are updated. No row is touched twice.
    const passed = (m: LaneCursor) => m.released && m.afterSeq <= cursorSeq;
    const kept = moved.filter((m) => !passed(m));
    const { rows } = await this.pool.query<{ lane: number }>(
      `WITH current AS (SELECT 1 FROM webhook_destinations WHERE id = $1 AND cursor_generation = $2),
       saved AS (
         UPDATE webhook_lanes l SET after_seq = GREATEST(l.after_seq, u.after_seq), released = u.released
           FROM unnest($3::int[], $4::bigint[], $5::boolean[]) AS u(lane, after_seq, released)
          WHERE l.destination_id = $1 AND l.lane = u.lane AND EXISTS (SELECT 1 FROM current))
       DELETE FROM webhook_lanes
        WHERE destination_id = $1 AND lane <> ALL($3::int[]) AND EXISTS (SELECT 1 FROM current)
          AND (lane = ANY($7::int[]) OR (released AND after_seq <= $6))
        RETURNING lane`,
      [
        destinationId,
        generation,
        kept.map((m) => m.lane),
        kept.map((m) => m.afterSeq.toString()),
        kept.map((m) => m.released),
        cursorSeq.toString(),
        moved.filter(passed).map((m) => m.lane),
      ],
    );
    return rows.map((row) => row.lane);
  }

  /**
   * After a change of the lane count: every lane of the new count reads its own events after
   * `afterSeq` (the least position any old lane or the cursor had). Events after it that were
   * delivered already may be sent again, never lost.
   */
  async restart(destinationId: string, generation: string, lanes: number, afterSeq: bigint): Promise<void> {
    await this.pool.query(
      `WITH current AS (SELECT 1 FROM webhook_destinations WHERE id = $1 AND cursor_generation = $2),
       gone AS (DELETE FROM webhook_lanes WHERE destination_id = $1 AND lane >= $3 AND EXISTS (SELECT 1 FROM current))
       INSERT INTO webhook_lanes (destination_id, lane, lane_count, after_seq)
       SELECT $1, n, $3, $4 FROM generate_series(0, $3 - 1) AS n WHERE EXISTS (SELECT 1 FROM current)
       ON CONFLICT (destination_id, lane) DO UPDATE SET lane_count = EXCLUDED.lane_count, after_seq = EXCLUDED.after_seq, released = false`,
      [destinationId, generation, lanes, afterSeq.toString()],
    );
  }
}

/**
 * Where a worker's lanes start. Lanes that had fallen behind start where their rows say; so do
 * lanes with queued rows (replays) and no row of their own, from the cursor, once a row says
 * so. After a change of the lane count every lane starts from the least position an old one had.
 */
export async function startLanes(
  lanes: Lane[],
  w: { id: string; cursors: LaneCursors; log: DeliveryLog; destination: WorkerDestination; db: <T>(work: () => Promise<T>) => Promise<T> },
): Promise<void> {
  const { id, cursors, log, db } = w;
  const { cursorSeq, cursorGeneration: generation } = w.destination;
  const cursor = BigInt(cursorSeq);
  const rows = await db(() => cursors.load(id));
  if (rows.some((row) => row.laneCount !== lanes.length)) {
    const least = rows.reduce((min, row) => (!row.released && row.afterSeq < min ? row.afterSeq : min), cursor);
    await db(() => cursors.restart(id, generation, lanes.length, least));
    for (const lane of lanes) putBehind(lane, least);
    return;
  }
  for (const row of rows) {
    const lane = lanes[row.lane];
    if (!lane) continue;
    if (row.released && row.afterSeq <= cursor) {
      // Caught up before the stop: its row goes at the next flush.
      lane.row = 'released';
      lane.afterSeq = row.afterSeq;
    } else {
      putBehind(lane, row.afterSeq);
      // A released row not yet passed by the cursor is behind again: saved so before the cursor moves.
      lane.moved = row.released;
    }
  }
  for (const index of await db(() => log.queuedLanes(id))) {
    const lane = lanes[index];
    if (!lane || lane.mode === 'queue') continue;
    await db(() => log.park(id, [], generation, { lane: index, lanes: lanes.length, afterSeq: cursorSeq }));
    putBehind(lane, cursor);
  }
}
