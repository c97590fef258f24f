import type pg from 'pg';
import { inTransaction } from '../../db/sql.ts';
import { TributaryError } from '../../errors.ts';
import type { ConsumerSettings, OffsetReset, TopicPartition, TopicPartitionOffset } from './input.ts';

/** A consumer group is named per account (sql/8_consumer_groups.sql). */
export interface GroupKey {
  accountId: string;
  groupId: string;
}

export interface Member extends ConsumerSettings {
  groupId: string;
  instanceId: string;
  topics: string[];
}

/** Which instance holds a partition, and the next offset it is to be given. */
export interface Held extends TopicPartition {
  instanceId: string;
  position: string;
}

export interface Move extends TopicPartition {
  from: string;
  to: string;
}

type Queryable = pg.Pool | pg.PoolClient;

/** Advisory-lock class of consumer-group bookkeeping ('cg'); the key within it hashes account and group. */
const LOCK_CLASS = 0x6367;
/** Advisory-lock class of an account's new groups ('ca'), taken inside a group's lock, never the other way round. */
const ACCOUNT_LOCK_CLASS = 0x6361;

interface MemberRow {
  group_id: string;
  instance_id: string;
  topics: string[];
  auto_commit: boolean;
  auto_offset_reset: OffsetReset;
  session_timeout_ms: number;
}
const MEMBER_COLUMNS = 'group_id, instance_id, topics, auto_commit, auto_offset_reset, session_timeout_ms';
const toMember = (r: MemberRow): Member => ({
  groupId: r.group_id,
  instanceId: r.instance_id,
  topics: r.topics,
  autoCommit: r.auto_commit,
  autoOffsetReset: r.auto_offset_reset,
  sessionTimeoutMs: r.session_timeout_ms,
});

const topicsOf = (tps: TopicPartition[]) => tps.map((tp) => tp.topic);
const partitionsOf = (tps: TopicPartition[]) => tps.map((tp) => tp.partition);
export const tpKey = (tp: TopicPartition) => `${tp.partition}/${tp.topic}`;

/** The SQL of consumer groups: instances, committed offsets and the holders' positions. */
export class GroupStore {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Runs `work` in one transaction holding the group's lock, so that joins, expiries,
   * hand-overs of partitions and commits of one group happen one at a time (any process).
   */
  locked<T>(key: GroupKey, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, `${key.accountId}/${key.groupId}`]);
      return work(client);
    });
  }

  /**
   * The group exists from here on, and has been active now. A new group counts against the
   * account's max_consumer_groups (409 past it); call under the group's lock.
   */
  async enter(client: pg.PoolClient, key: GroupKey): Promise<void> {
    // Written at most once a minute per group: a busy consumer costs no extra write per poll.
    const { rows } = await client.query<{ present: boolean }>(
      `WITH touched AS (UPDATE consumer_groups SET active_at = now()
                         WHERE account_id = $1 AND group_id = $2 AND active_at < now() - interval '1 minute')
       SELECT EXISTS (SELECT 1 FROM consumer_groups WHERE account_id = $1 AND group_id = $2) AS present`,
      [key.accountId, key.groupId],
    );
    if (rows[0]!.present) return;
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ACCOUNT_LOCK_CLASS, key.accountId]);
    const { rows: made } = await client.query<{ max: number; count: number }>(
      `WITH made AS (
         INSERT INTO consumer_groups (account_id, group_id)
         SELECT $1, $2 FROM accounts a
          WHERE a.id = $1 AND (SELECT count(*) FROM consumer_groups WHERE account_id = $1) < a.max_consumer_groups
         RETURNING 1)
       SELECT a.max_consumer_groups AS max, (SELECT count(*) FROM made)::int AS count FROM accounts a WHERE a.id = $1`,
      [key.accountId, key.groupId],
    );
    if (made[0]?.count !== 1) {
      const max = made[0]?.max ?? 0;
      throw new TributaryError(
        'conflict',
        `this account has reached its limit of ${max} consumer groups: a group goes once it has had no instance and no commit for a while (the operator can raise the limit)`,
      );
    }
  }

  /**
   * Creates the instance with `settings`, or refreshes it (topics, last seen); answers its
   * settings. A new instance counts against the account's max_group_members (409 past it).
   */
  async join(client: pg.PoolClient, key: GroupKey, instanceId: string, topics: string[], settings: ConsumerSettings): Promise<Member> {
    const { rows } = await client.query<MemberRow>(
      `INSERT INTO consumer_group_members (account_id, group_id, instance_id, topics, auto_commit, auto_offset_reset, session_timeout_ms)
       SELECT $1, $2, $3, $4, $5, $6, $7
        WHERE EXISTS (SELECT 1 FROM consumer_group_members WHERE account_id = $1 AND group_id = $2 AND instance_id = $3)
           OR (SELECT count(*) FROM consumer_group_members WHERE account_id = $1 AND group_id = $2)
              < (SELECT max_group_members FROM accounts WHERE id = $1)
       ON CONFLICT (account_id, group_id, instance_id) DO UPDATE SET topics = excluded.topics, last_seen = now()
       RETURNING ${MEMBER_COLUMNS}`,
      [key.accountId, key.groupId, instanceId, topics, settings.autoCommit, settings.autoOffsetReset, settings.sessionTimeoutMs],
    );
    if (rows[0]) return toMember(rows[0]);
    const { rows: limit } = await client.query<{ max: number }>('SELECT max_group_members AS max FROM accounts WHERE id = $1', [key.accountId]);
    throw new TributaryError(
      'conflict',
      `group ${key.groupId} has reached its limit of ${limit[0]?.max ?? 0} live instances: an instance goes after its session timeout, or with delete-consumer (the operator can raise the limit)`,
    );
  }

  /** Removes the instances not seen within their session timeout (their positions go with them), but `keep`. */
  async expire(client: pg.PoolClient, key: GroupKey, keep?: string): Promise<string[]> {
    const { rows } = await client.query<{ instance_id: string }>(
      `DELETE FROM consumer_group_members
        WHERE account_id = $1 AND group_id = $2 AND ($3::text IS NULL OR instance_id <> $3)
          AND last_seen < clock_timestamp() - session_timeout_ms * interval '1 millisecond'
        RETURNING instance_id`,
      [key.accountId, key.groupId, keep ?? null],
    );
    return rows.map((r) => r.instance_id);
  }

  async members(client: Queryable, key: GroupKey): Promise<Member[]> {
    const { rows } = await client.query<MemberRow>(
      `SELECT ${MEMBER_COLUMNS} FROM consumer_group_members WHERE account_id = $1 AND group_id = $2 ORDER BY instance_id`,
      [key.accountId, key.groupId],
    );
    return rows.map(toMember);
  }

  async member(client: Queryable, key: GroupKey, instanceId: string): Promise<Member | undefined> {
    const { rows } = await client.query<MemberRow>(
      `SELECT ${MEMBER_COLUMNS} FROM consumer_group_members WHERE account_id = $1 AND group_id = $2 AND instance_id = $3`,
      [key.accountId, key.groupId, instanceId],
    );
    return rows[0] && toMember(rows[0]);
  }

  /** The live instances of every group of the account (for GET /consumers). */
  async liveMembers(accountId: string): Promise<Member[]> {
    const { rows } = await this.pool.query<MemberRow>(
      `SELECT ${MEMBER_COLUMNS} FROM consumer_group_members
        WHERE account_id = $1 AND last_seen >= clock_timestamp() - session_timeout_ms * interval '1 millisecond'
        ORDER BY group_id, instance_id`,
      [accountId],
    );
    return rows.map(toMember);
  }

  /** Removes an instance; false when there is none. Its positions go with it. */
  async remove(client: pg.PoolClient, key: GroupKey, instanceId: string): Promise<boolean> {
    const { rowCount } = await client.query('DELETE FROM consumer_group_members WHERE account_id = $1 AND group_id = $2 AND instance_id = $3', [
      key.accountId,
      key.groupId,
      instanceId,
    ]);
    return (rowCount ?? 0) > 0;
  }

  /** Commits the positions the instance holds: what it was handed so far counts as read. */
  async commitPositions(client: Queryable, key: GroupKey, instanceId: string): Promise<number> {
    const { rowCount } = await client.query(
      `INSERT INTO consumer_group_offsets (account_id, group_id, topic, partition, committed)
       SELECT account_id, group_id, topic, partition, position FROM consumer_group_positions
        WHERE account_id = $1 AND group_id = $2 AND instance_id = $3
       ON CONFLICT (account_id, group_id, topic, partition)
       DO UPDATE SET committed = excluded.committed, updated_at = now()
        WHERE consumer_group_offsets.committed IS DISTINCT FROM excluded.committed`,
      [key.accountId, key.groupId, instanceId],
    );
    return rowCount ?? 0;
  }

  /** Commits explicit offsets (the next offset to read, as in Kafka). */
  async commitOffsets(client: Queryable, key: GroupKey, offsets: TopicPartitionOffset[]): Promise<void> {
    if (offsets.length === 0) return;
    await client.query(
      `INSERT INTO consumer_group_offsets (account_id, group_id, topic, partition, committed)
       SELECT $1, $2, o.topic, o.partition, o.committed
         FROM unnest($3::text[], $4::int[], $5::bigint[]) AS o(topic, partition, committed)
       ON CONFLICT (account_id, group_id, topic, partition)
       DO UPDATE SET committed = excluded.committed, updated_at = now()`,
      [key.accountId, key.groupId, topicsOf(offsets), partitionsOf(offsets), offsets.map((o) => String(o.offset))],
    );
  }

  /** Committed offsets of the given partitions (absent: never committed). */
  async committed(client: Queryable, key: GroupKey, tps: TopicPartition[]): Promise<Map<string, string>> {
    if (tps.length === 0) return new Map();
    const { rows } = await client.query<{ topic: string; partition: number; committed: string }>(
      `SELECT o.topic, o.partition, o.committed FROM consumer_group_offsets o
         JOIN unnest($3::text[], $4::int[]) AS w(topic, partition) USING (topic, partition)
        WHERE o.account_id = $1 AND o.group_id = $2`,
      [key.accountId, key.groupId, topicsOf(tps), partitionsOf(tps)],
    );
    return new Map(rows.map((r) => [tpKey(r), r.committed]));
  }

  /** Every committed offset of the group, in (topic, partition) order. */
  async allCommitted(key: GroupKey): Promise<Array<TopicPartition & { committed: string }>> {
    const { rows } = await this.pool.query<{ topic: string; partition: number; committed: string }>(
      `SELECT topic, partition, committed FROM consumer_group_offsets
        WHERE account_id = $1 AND group_id = $2 ORDER BY topic, partition`,
      [key.accountId, key.groupId],
    );
    return rows;
  }

  /** Who holds the given partitions, and where they stand. */
  async held(client: Queryable, key: GroupKey, tps: TopicPartition[]): Promise<Map<string, Held>> {
    if (tps.length === 0) return new Map();
    const { rows } = await client.query<{ topic: string; partition: number; instance_id: string; position: string }>(
      `SELECT p.topic, p.partition, p.instance_id, p.position FROM consumer_group_positions p
         JOIN unnest($3::text[], $4::int[]) AS w(topic, partition) USING (topic, partition)
        WHERE p.account_id = $1 AND p.group_id = $2`,
      [key.accountId, key.groupId, topicsOf(tps), partitionsOf(tps)],
    );
    return new Map(rows.map((r) => [tpKey(r), { topic: r.topic, partition: r.partition, instanceId: r.instance_id, position: r.position }]));
  }

  /** The instance takes these partitions at these positions (from whoever held them). */
  async hold(client: pg.PoolClient, key: GroupKey, instanceId: string, taken: Array<TopicPartition & { position: string }>): Promise<void> {
    if (taken.length === 0) return;
    await client.query(
      `INSERT INTO consumer_group_positions (account_id, group_id, topic, partition, instance_id, position)
       SELECT $1, $2, t.topic, t.partition, $3, t.position
         FROM unnest($4::text[], $5::int[], $6::bigint[]) AS t(topic, partition, position)
       ON CONFLICT (account_id, group_id, topic, partition)
       DO UPDATE SET instance_id = excluded.instance_id, position = excluded.position`,
      [key.accountId, key.groupId, instanceId, topicsOf(taken), partitionsOf(taken), taken.map((t) => t.position)],
    );
  }

  /** Lets go of every partition the instance holds but `keep`. */
  async release(client: pg.PoolClient, key: GroupKey, instanceId: string, keep: TopicPartition[]): Promise<void> {
    await client.query(
      `DELETE FROM consumer_group_positions p
        WHERE p.account_id = $1 AND p.group_id = $2 AND p.instance_id = $3
          AND NOT EXISTS (SELECT 1 FROM unnest($4::text[], $5::int[]) AS k(topic, partition)
                           WHERE k.topic = p.topic AND k.partition = p.partition)`,
      [key.accountId, key.groupId, instanceId, topicsOf(keep), partitionsOf(keep)],
    );
  }

  /**
   * Moves positions past what is being handed out, each only if the instance still holds
   * the partition at `from` (compare-and-set). Answers the partitions that moved.
   */
  async advance(key: GroupKey, instanceId: string, moves: Move[]): Promise<Set<string>> {
    if (moves.length === 0) return new Set();
    const { rows } = await this.pool.query<{ topic: string; partition: number }>(
      `UPDATE consumer_group_positions p SET position = m.to_position
         FROM unnest($4::text[], $5::int[], $6::bigint[], $7::bigint[]) AS m(topic, partition, from_position, to_position)
        WHERE p.account_id = $1 AND p.group_id = $2 AND p.instance_id = $3
          AND p.topic = m.topic AND p.partition = m.partition AND p.position = m.from_position
        RETURNING p.topic, p.partition`,
      [key.accountId, key.groupId, instanceId, topicsOf(moves), partitionsOf(moves), moves.map((m) => m.from), moves.map((m) => m.to)],
    );
    return new Set(rows.map(tpKey));
  }
}
