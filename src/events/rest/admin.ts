import { TributaryError } from '../../errors.ts';
import { assignRoundRobin } from './assign.ts';
import type { RequestScope, RestContext } from './context.ts';
import type { TopicPartition, TopicPartitionOffset } from './input.ts';

/** Upstash's metadata API, limited to what the account owns. */

/** `GET /topics`: `{ "<topic>": <partitions> }`. */
export async function listTopics(ctx: RestContext, scope: RequestScope): Promise<Record<string, number>> {
  const topics = await ctx.topics.all(scope.accountId);
  return Object.fromEntries(topics.map((t) => [t.topic, t.partitions]));
}

interface GroupAssignments {
  name: string;
  instances: Array<{ name: string; topics: Array<{ topic: string; partitions: number[] }> }>;
}

/** `GET /consumers`: the live instances of the account's groups and the partitions each holds. */
export async function listConsumers(ctx: RestContext, scope: RequestScope): Promise<GroupAssignments[]> {
  const members = await ctx.groups.liveMembers(scope.accountId);
  const visible = await ctx.topics.visible(
    scope.accountId,
    members.flatMap((m) => m.topics),
  );
  const partitions = new Map([...visible.values()].map((t) => [t.topic, t.partitions]));
  const byGroup = groupBy(members, (m) => m.groupId);
  return [...byGroup].map(([name, group]) => {
    const assignment = assignRoundRobin(group, partitions);
    return {
      name,
      instances: group.map((m) => {
        const byTopic = groupBy(assignment.get(m.instanceId) ?? [], (tp) => tp.topic);
        return { name: m.instanceId, topics: [...byTopic].map(([topic, tps]) => ({ topic, partitions: tps.map((tp) => tp.partition) })) };
      }),
    };
  });
}

/** Map.groupBy, which Node 20 lacks. */
function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const list = groups.get(key);
    if (list) list.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

/**
 * `/offsets/{earliest|latest|<ms>}`: per partition the first offset kept, the next offset, or
 * the first offset logged at or after the timestamp (-1 when there is none, as in Kafka).
 */
export async function partitionOffsets(ctx: RestContext, scope: RequestScope, at: string, wanted: TopicPartition[]): Promise<TopicPartitionOffset[]> {
  if (at !== 'earliest' && at !== 'latest' && !/^\d{1,15}$/.test(at)) {
    throw new TributaryError('invalid_request', 'the timestamp in the path must be earliest, latest or milliseconds since the epoch');
  }
  await ctx.topics.require(scope.accountId, wanted);
  const answer: TopicPartitionOffset[] = [];
  for (const tp of wanted) {
    let offset: string | null;
    if (at === 'earliest' || at === 'latest') {
      const offsets = await ctx.topics.partitionOffsets(tp.topic, tp.partition);
      offset = at === 'earliest' ? offsets.earliest : offsets.next;
    } else {
      const { rows } = await ctx.pool.query<{ offset: string | null }>(
        `SELECT min("offset") AS offset FROM events WHERE topic = $1 AND partition = $2 AND created_at >= to_timestamp($3::double precision / 1000)`,
        [tp.topic, tp.partition, Number(at)],
      );
      offset = rows[0]?.offset ?? null;
    }
    answer.push({ topic: tp.topic, partition: tp.partition, offset: offset === null ? -1 : Number(offset) });
  }
  return answer;
}
