import type pg from 'pg';
import { inTransaction } from '../../db/sql.ts';
import { LANE_SQL } from './lanes.ts';

export type DeliveryStatus = 'pending' | 'retrying' | 'delivered' | 'exhausted';
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'retrying', 'delivered', 'exhausted'];

/** One row of the delivery log (sql/6_webhooks.sql). Bigints travel as decimal strings. */
export interface DeliveryRecord {
  id: string;
  destinationId: string;
  seq: string;
  lane: number;
  topic: string;
  recordId: string;
  eventKey: string;
  eventCreatedAt: Date;
  status: DeliveryStatus;
  attempts: number;
  replays: number;
  lastStatusCode: number | null;
  lastError: string | null;
  firstAttemptAt: Date | null;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  finishedAt: Date | null;
  createdAt: Date;
}

/** A queued row as the deliverer works it: the log row plus the event JSON. */
export interface QueuedDelivery extends DeliveryRecord {
  value: string;
}

/** What the deliverer writes when it parks an event in the queue. */
export interface NewDelivery {
  seq: string;
  lane: number;
  topic: string;
  recordId: string;
  eventKey: string;
  eventCreatedAt: Date;
  value: string;
  status: 'pending' | 'retrying' | 'exhausted';
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  firstAttemptAt: Date | null;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
}

interface DeliveryRow {
  id: string;
  destination_id: string;
  seq: string;
  lane: number;
  topic: string;
  record_id: string;
  event_key: string;
  event_created_at: Date;
  status: DeliveryStatus;
  attempts: number;
  replays: number;
  last_status_code: number | null;
  last_error: string | null;
  first_attempt_at: Date | null;
  last_attempt_at: Date | null;
  next_attempt_at: Date | null;
  finished_at: Date | null;
  created_at: Date;
}

const COLUMNS = `id, destination_id, seq, lane, topic, record_id, event_key, event_created_at, status, attempts, replays,
  last_status_code, last_error, first_attempt_at, last_attempt_at, next_attempt_at, finished_at, created_at`;

const toRecord = (row: DeliveryRow): DeliveryRecord => ({
  id: row.id,
  destinationId: row.destination_id,
  seq: row.seq,
  lane: row.lane,
  topic: row.topic,
  recordId: row.record_id,
  eventKey: row.event_key,
  eventCreatedAt: row.event_created_at,
  status: row.status,
  attempts: row.attempts,
  replays: row.replays,
  lastStatusCode: row.last_status_code,
  lastError: row.last_error,
  firstAttemptAt: row.first_attempt_at,
  lastAttemptAt: row.last_attempt_at,
  nextAttemptAt: row.next_attempt_at,
  finishedAt: row.finished_at,
  createdAt: row.created_at,
});

/** A lane that reads its own events from the log, every one of them up to `afterSeq` accounted for. */
export interface LaneBehind {
  lane: number;
  lanes: number;
  afterSeq: string;
}

export interface AttemptOutcome {
  statusCode: number | undefined;
  error: string | undefined;
  at: Date;
}

/** The delivery log: what the API lists and replays, and the deliverer's durable queue. */
export class DeliveryLog {
  constructor(private readonly pool: pg.Pool) {}

  // ── for the API ──────────────────────────────────────────────────────────

  async list(
    destinationId: string,
    options: { status?: DeliveryStatus; after?: string; limit: number },
  ): Promise<{ data: DeliveryRecord[]; hasMore: boolean }> {
    const { rows } = await this.pool.query<DeliveryRow>(
      `SELECT ${COLUMNS} FROM webhook_deliveries
        WHERE destination_id = $1 AND ($2::text IS NULL OR status = $2) AND id > $3
        ORDER BY id LIMIT $4`,
      [destinationId, options.status ?? null, options.after ?? '0', options.limit + 1],
    );
    return { data: rows.slice(0, options.limit).map(toRecord), hasMore: rows.length > options.limit };
  }

  async counts(destinationId: string): Promise<Record<DeliveryStatus, number>> {
    const { rows } = await this.pool.query<{ status: DeliveryStatus; n: number }>(
      'SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE destination_id = $1 GROUP BY status',
      [destinationId],
    );
    const counts = { pending: 0, retrying: 0, delivered: 0, exhausted: 0 };
    for (const row of rows) counts[row.status] = row.n;
    return counts;
  }

  async statusOf(destinationId: string, ids: string[]): Promise<Map<string, DeliveryStatus>> {
    const { rows } = await this.pool.query<{ id: string; status: DeliveryStatus }>(
      'SELECT id, status FROM webhook_deliveries WHERE destination_id = $1 AND id = ANY($2::bigint[])',
      [destinationId, ids],
    );
    return new Map(rows.map((row) => [row.id, row.status]));
  }

  /** When a queued delivery is next due (null: now), as the row says: a retry-now request moves it. */
  async nextAttemptAt(id: string): Promise<Date | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>('SELECT next_attempt_at AS at FROM webhook_deliveries WHERE id = $1', [id]);
    return rows[0]?.at ?? null;
  }

  /**
   * Of all the destination's deliveries, or those of `ids`: the exhausted ones go back in the
   * queue with a fresh retry budget (replayed), and those waiting out a back-off are due now,
   * their attempts kept (retried). Either bumps the destination's replay generation, so that
   * its deliverer looks for them.
   */
  async replay(destinationId: string, ids: string[] | undefined): Promise<{ replayed: string[]; retried: string[] }> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ id: string }>(
        `UPDATE webhook_deliveries
            SET status = 'pending', attempts = 0, replays = replays + 1, first_attempt_at = NULL,
                next_attempt_at = NULL, finished_at = NULL
          WHERE destination_id = $1 AND status = 'exhausted' AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))
          RETURNING id`,
        [destinationId, ids ?? null],
      );
      const { rows: waiting } = await client.query<{ id: string }>(
        `UPDATE webhook_deliveries SET next_attempt_at = now()
          WHERE destination_id = $1 AND status = 'retrying' AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))
          RETURNING id`,
        [destinationId, ids ?? null],
      );
      if (rows.length + waiting.length > 0) {
        await client.query('UPDATE webhook_destinations SET replay_generation = replay_generation + 1 WHERE id = $1', [destinationId]);
      }
      const sorted = (list: Array<{ id: string }>) => list.map((row) => row.id).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
      return { replayed: sorted(rows), retried: sorted(waiting) };
    });
  }

  // ── for the deliverer ────────────────────────────────────────────────────

  /**
   * Parks events in the queue in one statement. A row already there is left as it is. With
   * `behind`, the same statement notes that the lane reads its own events from the log after
   * `afterSeq` (webhook_lanes): the rows and the lane's position are written together, so a
   * crash between them cannot send an event twice or lose one. Nothing is written for a worker
   * of an older cursor generation: its destination was recovered, and these events are sent
   * again from the moved-back cursor.
   */
  async park(destinationId: string, items: NewDelivery[], generation: string, behind?: LaneBehind): Promise<void> {
    if (items.length === 0 && !behind) return;
    const col = <K extends keyof NewDelivery>(key: K) => items.map((item) => item[key]);
    await this.pool.query(
      `WITH current AS (SELECT 1 FROM webhook_destinations WHERE id = $1 AND cursor_generation = $16),
       parked AS (
         INSERT INTO webhook_deliveries (destination_id, seq, lane, topic, record_id, event_key, event_created_at, value, status,
                                         attempts, last_status_code, last_error, first_attempt_at, last_attempt_at, next_attempt_at,
                                         finished_at)
         SELECT $1, u.seq, u.lane, u.topic, u.record_id, u.event_key, u.event_created_at, u.value, u.status, u.attempts,
                u.last_status_code, u.last_error, u.first_attempt_at, u.last_attempt_at, u.next_attempt_at,
                CASE WHEN u.status = 'exhausted' THEN u.last_attempt_at END
           FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::text[], $9::text[],
                       $10::int[], $11::int[], $12::text[], $13::timestamptz[], $14::timestamptz[], $15::timestamptz[])
                AS u(seq, lane, topic, record_id, event_key, event_created_at, value, status, attempts, last_status_code,
                     last_error, first_attempt_at, last_attempt_at, next_attempt_at)
          WHERE EXISTS (SELECT 1 FROM current)
         ON CONFLICT (destination_id, seq) DO NOTHING)
       INSERT INTO webhook_lanes (destination_id, lane, lane_count, after_seq)
       SELECT $1, $17, $18, $19 WHERE $17::int IS NOT NULL AND EXISTS (SELECT 1 FROM current)
       ON CONFLICT (destination_id, lane) DO UPDATE
         SET after_seq = GREATEST(webhook_lanes.after_seq, EXCLUDED.after_seq), lane_count = EXCLUDED.lane_count, released = false`,
      [
        destinationId,
        col('seq'),
        col('lane'),
        col('topic'),
        col('recordId'),
        col('eventKey'),
        col('eventCreatedAt'),
        col('value'),
        col('status'),
        col('attempts'),
        col('lastStatusCode'),
        col('lastError'),
        col('firstAttemptAt'),
        col('lastAttemptAt'),
        col('nextAttemptAt'),
        generation,
        behind?.lane ?? null,
        behind?.lanes ?? null,
        behind?.afterSeq ?? null,
      ],
    );
  }

  /** The next unfinished rows of one lane, in log order. */
  async queued(destinationId: string, lane: number, limit: number): Promise<QueuedDelivery[]> {
    const { rows } = await this.pool.query<DeliveryRow & { value: string }>(
      `SELECT ${COLUMNS}, value FROM webhook_deliveries
        WHERE destination_id = $1 AND lane = $2 AND status IN ('pending', 'retrying')
        ORDER BY seq LIMIT $3`,
      [destinationId, lane, limit],
    );
    return rows.map((row) => ({ ...toRecord(row), value: row.value }));
  }

  /** The lanes that have unfinished rows. */
  async queuedLanes(destinationId: string): Promise<number[]> {
    const { rows } = await this.pool.query<{ lane: number }>(
      `SELECT DISTINCT lane FROM webhook_deliveries WHERE destination_id = $1 AND status IN ('pending', 'retrying')`,
      [destinationId],
    );
    return rows.map((row) => row.lane);
  }

  /** After a change of the lane count: moves unfinished rows to the lane their record hashes to now. */
  async relane(destinationId: string, lanes: number): Promise<void> {
    await this.pool.query(
      `UPDATE webhook_deliveries SET lane = ${LANE_SQL('record_id', '$2')}
        WHERE destination_id = $1 AND status IN ('pending', 'retrying') AND lane <> ${LANE_SQL('record_id', '$2')}`,
      [destinationId, lanes],
    );
  }

  /** A failed attempt of a queued row: either retried at `nextAttemptAt`, or exhausted (null). */
  async failed(id: string, attempts: number, outcome: AttemptOutcome, firstAttemptAt: Date, nextAttemptAt: Date | null): Promise<void> {
    await this.pool.query(
      `UPDATE webhook_deliveries
          SET status = CASE WHEN $6::timestamptz IS NULL THEN 'exhausted' ELSE 'retrying' END,
              attempts = $2, last_status_code = $3, last_error = $4, first_attempt_at = COALESCE(first_attempt_at, $5),
              last_attempt_at = $7::timestamptz, next_attempt_at = $6::timestamptz,
              finished_at = CASE WHEN $6::timestamptz IS NULL THEN $7::timestamptz END
        WHERE id = $1`,
      [id, attempts, outcome.statusCode ?? null, outcome.error ?? null, firstAttemptAt, nextAttemptAt, outcome.at],
    );
  }

  /** The row stays for the log; its copy of the event goes (it is never sent again). */
  async delivered(id: string, attempts: number, outcome: AttemptOutcome): Promise<void> {
    await this.pool.query(
      `UPDATE webhook_deliveries
          SET status = 'delivered', attempts = $2, last_status_code = $3, value = '',
              first_attempt_at = COALESCE(first_attempt_at, $4::timestamptz),
              last_attempt_at = $4::timestamptz, next_attempt_at = NULL, finished_at = $4::timestamptz
        WHERE id = $1`,
      [id, attempts, outcome.statusCode ?? null, outcome.at],
    );
  }

  /**
   * Keeps the newest `keep` exhausted deliveries of the destination: older ones go, counted in
   * the destination's dropped_count. Answers how many went.
   */
  async dropExhausted(destinationId: string, keep: number): Promise<number> {
    const { rows } = await this.pool.query<{ dropped: number }>(
      `WITH doomed AS (
         SELECT id FROM webhook_deliveries WHERE destination_id = $1 AND status = 'exhausted' ORDER BY id DESC OFFSET $2),
       gone AS (
         -- status again: a row replayed meanwhile is pending now, and stays.
         DELETE FROM webhook_deliveries d USING doomed WHERE d.id = doomed.id AND d.status = 'exhausted' RETURNING 1),
       counted AS (
         UPDATE webhook_destinations SET dropped_count = dropped_count + (SELECT count(*) FROM gone)
          WHERE id = $1 AND EXISTS (SELECT 1 FROM gone))
       SELECT count(*)::int AS dropped FROM gone`,
      [destinationId, keep],
    );
    return rows[0]?.dropped ?? 0;
  }

  /** History: delivered rows older than `olderThanMs` go; exhausted ones stay until replayed (or dropped past the cap). */
  async prune(destinationIds: string[], olderThanMs: number): Promise<number> {
    const { rowCount } = await this.pool.query(
      `DELETE FROM webhook_deliveries
        WHERE destination_id = ANY($1) AND status = 'delivered' AND finished_at < now() - make_interval(secs => $2)`,
      [destinationIds, olderThanMs / 1000],
    );
    return rowCount ?? 0;
  }
}
