import type pg from 'pg';
import { TributaryError } from '../../errors.ts';
import type { TopicPartition } from './input.ts';

type Queryable = pg.Pool | pg.PoolClient;

export interface VisibleTopic {
  topic: string;
  syncId: string;
  partitions: number;
}

/** `svc.<sync_id>.<collection>` → the sync id (sync ids hold no dots). */
export function syncIdOfTopic(topic: string): string | undefined {
  return /^svc\.([^.]+)\../.exec(topic)?.[1];
}

/** A collection's name as a topic ends with: a table's database name, or a Stripe object type. */
const isCollectionName = (name: string) => name.length > 0 && Buffer.byteLength(name) <= 63 && /^[^\s\p{Cc}*]+$/u.test(name);

/**
 * The one place that decides what an account may see. A topic of another account and a
 * topic that does not exist are the same thing here: absent. Callers answer both alike.
 */
export class TopicAccess {
  constructor(private readonly pool: pg.Pool) {}

  /** The named topics this account owns; the others are simply missing from the map. */
  async visible(accountId: string, topics: Iterable<string>, db: Queryable = this.pool): Promise<Map<string, VisibleTopic>> {
    const names = [...new Set(topics)];
    if (names.length === 0) return new Map();
    const { rows } = await db.query<{ topic: string; sync_id: string; partitions: number }>(
      'SELECT topic, sync_id, partitions FROM event_topics WHERE account_id = $1 AND topic = ANY($2::text[])',
      [accountId, names],
    );
    return new Map(rows.map((r) => [r.topic, { topic: r.topic, syncId: r.sync_id, partitions: r.partitions }]));
  }

  /** Every topic of the account, by name. */
  async all(accountId: string): Promise<VisibleTopic[]> {
    const { rows } = await this.pool.query<{ topic: string; sync_id: string; partitions: number }>(
      'SELECT topic, sync_id, partitions FROM event_topics WHERE account_id = $1 ORDER BY topic',
      [accountId],
    );
    return rows.map((r) => ({ topic: r.topic, syncId: r.sync_id, partitions: r.partitions }));
  }

  /**
   * The account's syncs that the named topics belong to, including topics that have no
   * event yet: a consumer waiting on them wakes when the first one is logged. Another
   * account's syncs never appear, so nobody wakes early on someone else's events.
   */
  async ownSyncs(accountId: string, topics: Iterable<string>): Promise<string[]> {
    const ids = [...new Set([...topics].map(syncIdOfTopic).filter((id): id is string => id !== undefined))];
    if (ids.length === 0) return [];
    const { rows } = await this.pool.query<{ id: string }>('SELECT id FROM syncs WHERE account_id = $1 AND id = ANY($2::text[])', [accountId, ids]);
    return rows.map((r) => r.id);
  }

  /**
   * The topics a consumer instance may name: the account's own, including those of its syncs
   * that have no event yet (a consumer may wait for the first). Anything else is refused with
   * the same 404 whether it exists under another account or not at all, so that nothing of
   * another account is stored or revealed.
   */
  async requireSubscribable(accountId: string, topics: string[]): Promise<void> {
    const visible = await this.visible(accountId, topics);
    const pending = topics.filter((topic) => !visible.has(topic));
    if (pending.length === 0) return;
    const own = new Set(await this.ownSyncs(accountId, pending));
    const unknown = pending.find((topic) => {
      const syncId = syncIdOfTopic(topic);
      return syncId === undefined || !own.has(syncId) || !isCollectionName(topic.slice(`svc.${syncId}.`.length));
    });
    if (unknown !== undefined) throw new TributaryError('not_found', `unknown topic: ${unknown}`);
  }

  /**
   * Where a partition stands: the next offset, and the oldest still kept (the next when none
   * is). The same as EventLogReader.offsets, on a given connection (one inside a transaction).
   */
  async partitionOffsets(topic: string, partition: number, db: Queryable = this.pool): Promise<{ earliest: string; next: string }> {
    const { rows } = await db.query<{ next: string | null; earliest: string | null }>(
      `SELECT (SELECT next_offset FROM event_partitions WHERE topic = $1 AND partition = $2) AS next,
              (SELECT min("offset") FROM events WHERE topic = $1 AND partition = $2) AS earliest`,
      [topic, partition],
    );
    const next = rows[0]?.next ?? '0';
    return { next, earliest: rows[0]?.earliest ?? next };
  }

  /**
   * The topics of `wanted`, all owned and each partition in range; otherwise the same 404
   * whether the topic is unknown, another account's, or the partition does not exist.
   */
  async require(accountId: string, wanted: TopicPartition[]): Promise<Map<string, VisibleTopic>> {
    const visible = await this.visible(
      accountId,
      wanted.map((w) => w.topic),
    );
    for (const w of wanted) {
      const topic = visible.get(w.topic);
      if (!topic || w.partition >= topic.partitions) throw unknownTopicPartition(w);
    }
    return visible;
  }
}

export const unknownTopicPartition = (w: TopicPartition) => new TributaryError('not_found', `unknown topic or partition: ${w.topic} partition ${w.partition}`);
