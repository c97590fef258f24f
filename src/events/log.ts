import type pg from 'pg';
import { ident } from '../db/sql.ts';
import { LANE_SQL } from './lane-hash.ts';

/** One event as the log keeps it (sql/5_event_log.sql). `value` is the event JSON, as delivered. */
export interface LoggedEvent {
  syncId: string;
  seq: string;
  topic: string;
  partition: number;
  offset: string;
  /** The record id: the Kafka message key. */
  recordId: string;
  /** The idempotency key: `svc-event-id` on Kafka and webhooks, `key` on REST. */
  eventKey: string;
  createdAt: Date;
  value: string;
  /** Set on a backfill's read meant for one webhook destination: no other reader takes it. */
  destinationId?: string;
}

interface EventRow {
  sync_id: string;
  seq: string;
  topic: string;
  partition: number;
  offset: string;
  record_id: string;
  event_key: string;
  created_at: Date;
  value: string;
  destination_id: string | null;
}

const COLUMNS = 'sync_id, seq, topic, partition, "offset", record_id, event_key, created_at, value, destination_id';

const toEvent = (row: EventRow): LoggedEvent => ({
  syncId: row.sync_id,
  seq: row.seq,
  topic: row.topic,
  partition: row.partition,
  offset: row.offset,
  recordId: row.record_id,
  eventKey: row.event_key,
  createdAt: row.created_at,
  value: row.value,
  ...(row.destination_id === null ? {} : { destinationId: row.destination_id }),
});

/** Whether a reader that is not webhook destination `destinationId` (or any) takes the event. */
export const isFor = (event: LoggedEvent, destinationId?: string): boolean => event.destinationId === undefined || event.destinationId === destinationId;

export interface TopicInfo {
  topic: string;
  syncId: string;
  accountId: string;
  collection: string;
  partitions: number;
}

/** The topic name of a collection, as the README's Events section gives it. */
export function topicName(syncId: string, collection: string): string {
  return `svc.${syncId}.${collection}`;
}

/** Reads of the event log; bigints (seq, offset) travel as decimal strings. */
export class EventLogReader {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * A sync's events after `afterSeq` in log order, optionally only some topics. Reads meant
   * for one webhook destination come too (seqs stay consecutive): readers skip them (isFor).
   */
  async bySeq(syncId: string, afterSeq: string, options: { topics?: string[]; limit?: number } = {}): Promise<LoggedEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      `SELECT ${COLUMNS} FROM events
        WHERE sync_id = $1 AND seq > $2 AND ($3::text[] IS NULL OR topic = ANY($3))
        ORDER BY seq LIMIT $4`,
      [syncId, afterSeq, options.topics ?? null, options.limit ?? 1000],
    );
    return rows.map(toEvent);
  }

  /**
   * The events of one webhook lane (records whose laneOf over `lanes` is `lane`) after
   * `afterSeq` and up to `upToSeq`, in log order: what a lane that fell behind reads itself.
   */
  async ofLane(
    syncId: string,
    range: { afterSeq: string; upToSeq: string },
    options: { topics: string[]; lane: number; lanes: number; limit: number },
  ): Promise<LoggedEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      `SELECT ${COLUMNS} FROM events
        WHERE sync_id = $1 AND seq > $2 AND seq <= $3 AND topic = ANY($4) AND ${LANE_SQL('record_id', '$6')} = $5
        ORDER BY seq LIMIT $7`,
      [syncId, range.afterSeq, range.upToSeq, options.topics, options.lane, options.lanes, options.limit],
    );
    return rows.map(toEvent);
  }

  /** One partition from `fromOffset` on (inclusive), Kafka-style. */
  async byOffset(topic: string, partition: number, fromOffset: string, limit = 1000): Promise<LoggedEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      `SELECT ${COLUMNS} FROM events
        WHERE topic = $1 AND partition = $2 AND "offset" >= $3
        ORDER BY "offset" LIMIT $4`,
      [topic, partition, fromOffset, limit],
    );
    return rows.map(toEvent);
  }

  /** The next offset of a partition (one past the last event), and the oldest still kept. */
  async offsets(topic: string, partition: number): Promise<{ earliest: string; next: string }> {
    const { rows } = await this.pool.query<{ next: string | null; earliest: string | null }>(
      `SELECT (SELECT next_offset FROM event_partitions WHERE topic = $1 AND partition = $2) AS next,
              (SELECT min("offset") FROM events WHERE topic = $1 AND partition = $2) AS earliest`,
      [topic, partition],
    );
    const next = rows[0]?.next ?? '0';
    return { next, earliest: rows[0]?.earliest ?? next };
  }

  /** The last seq a sync's decoder has logged ('0' before the first). */
  async lastSeq(syncId: string): Promise<string> {
    const { rows } = await this.pool.query<{ seq: string }>('SELECT seq FROM decoder_progress WHERE sync_id = $1', [syncId]);
    return rows[0]?.seq ?? '0';
  }

  async topic(topic: string): Promise<TopicInfo | undefined> {
    const { rows } = await this.pool.query<TopicRow>(`SELECT ${TOPIC_COLUMNS} FROM event_topics WHERE topic = $1`, [topic]);
    return rows[0] && toTopic(rows[0]);
  }

  async topicsOfAccount(accountId: string): Promise<TopicInfo[]> {
    const { rows } = await this.pool.query<TopicRow>(`SELECT ${TOPIC_COLUMNS} FROM event_topics WHERE account_id = $1 ORDER BY topic`, [accountId]);
    return rows.map(toTopic);
  }

  async topicsOfSync(syncId: string): Promise<TopicInfo[]> {
    const { rows } = await this.pool.query<TopicRow>(`SELECT ${TOPIC_COLUMNS} FROM event_topics WHERE sync_id = $1 ORDER BY topic`, [syncId]);
    return rows.map(toTopic);
  }
}

interface TopicRow {
  topic: string;
  sync_id: string;
  account_id: string;
  collection: string;
  partitions: number;
}
const TOPIC_COLUMNS = 'topic, sync_id, account_id, collection, partitions';
const toTopic = (row: TopicRow): TopicInfo => ({
  topic: row.topic,
  syncId: row.sync_id,
  accountId: row.account_id,
  collection: row.collection,
  partitions: row.partitions,
});

const DAY_MS = 86_400_000;

function dayPartition(day: number): { name: string; from: string; to: string } {
  const from = new Date(day * DAY_MS);
  const to = new Date((day + 1) * DAY_MS);
  return { name: `events_${from.toISOString().slice(0, 10).replaceAll('-', '')}`, from: from.toISOString(), to: to.toISOString() };
}

/** Makes sure the day partitions that cover `at` (and the next day) exist. Idempotent, race-safe. */
export async function ensureEventPartitions(client: pg.Pool | pg.PoolClient, at: Date): Promise<void> {
  const today = Math.floor(at.getTime() / DAY_MS);
  for (const day of [today, today + 1]) {
    const part = dayPartition(day);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS ${ident(part.name)} PARTITION OF events FOR VALUES FROM ('${part.from}') TO ('${part.to}')`);
    } catch (error) {
      // Two processes creating the same day at once: the loser sees the winner's table.
      const code = (error as { code?: string }).code;
      if (code !== '42P07' && code !== '23505') throw error;
    }
  }
}

/**
 * Retention: drops the day partitions that end before `now - retentionMs`. A partition
 * is dropped whole, so an event lives at least the retention and at most one day more.
 */
export async function dropExpiredEventPartitions(pool: pg.Pool, retentionMs: number, now = new Date()): Promise<string[]> {
  const { rows } = await pool.query<{ name: string; bound: string }>(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'events'::regclass`,
  );
  const cutoff = now.getTime() - retentionMs;
  const dropped: string[] = [];
  for (const row of rows) {
    const upper = /TO \('([^']+)'\)/.exec(row.bound)?.[1];
    if (!upper || new Date(upper).getTime() > cutoff) continue;
    await pool.query(`DROP TABLE IF EXISTS ${ident(row.name)}`);
    dropped.push(row.name);
  }
  return dropped;
}
