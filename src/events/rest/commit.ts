import { TributaryError } from '../../errors.ts';
import type { RequestScope, RestContext } from './context.ts';
import { tpKey, type GroupKey } from './groups.ts';
import type { CommittedRequest, TopicPartition, TopicPartitionOffset } from './input.ts';

/** Kafka's answer for a partition the group never committed. */
const NO_OFFSET = -1;

/**
 * `/commit/{group}/{instance}`: explicit offsets are stored as given (Kafka's meaning: the
 * next offset the group reads); without any, the instance's positions (one past what it was
 * handed) are committed. Explicit offsets must name the account's own partitions (the same
 * 404 for unknown and foreign ones).
 */
export async function commit(
  ctx: RestContext,
  scope: RequestScope,
  groupId: string,
  instanceId: string,
  offsets: TopicPartitionOffset[] | undefined,
): Promise<void> {
  const key: GroupKey = { accountId: scope.accountId, groupId };
  if (!offsets) {
    await ctx.groups.locked(key, (client) => ctx.groups.commitPositions(client, key, instanceId));
    return;
  }
  await ctx.topics.require(scope.accountId, offsets);
  // A commit may make the group (it counts against the account's limit) and keeps it active.
  await ctx.groups.locked(key, async (client) => {
    await ctx.groups.enter(client, key);
    await ctx.groups.commitOffsets(client, key, offsets);
  });
}

/**
 * `/committed/{group}/{instance}`: the group's committed offsets, -1 where none. Partitions
 * of topics the account does not own answer -1 like any partition never committed; asking
 * by topic name lists the partitions of the account's own topics only.
 */
export async function committed(ctx: RestContext, scope: RequestScope, groupId: string, request: CommittedRequest): Promise<TopicPartitionOffset[]> {
  const key: GroupKey = { accountId: scope.accountId, groupId };
  if ('all' in request) {
    const rows = await ctx.groups.allCommitted(key);
    const visible = await ctx.topics.visible(
      scope.accountId,
      rows.map((r) => r.topic),
    );
    return rows.filter((r) => visible.has(r.topic)).map((r) => ({ topic: r.topic, partition: r.partition, offset: Number(r.committed) }));
  }
  let wanted: TopicPartition[];
  if ('topics' in request) {
    const visible = await ctx.topics.visible(scope.accountId, request.topics);
    wanted = [...new Set(request.topics)].flatMap((topic) =>
      Array.from({ length: visible.get(topic)?.partitions ?? 0 }, (_, partition) => ({ topic, partition })),
    );
  } else {
    wanted = request.partitions;
  }
  const visible = await ctx.topics.visible(
    scope.accountId,
    wanted.map((w) => w.topic),
  );
  const own = wanted.filter((w) => visible.has(w.topic));
  const offsets = await ctx.groups.committed(ctx.pool, key, own);
  return wanted.map((w) => {
    const offset = visible.has(w.topic) ? offsets.get(tpKey(w)) : undefined;
    return { topic: w.topic, partition: w.partition, offset: offset === undefined ? NO_OFFSET : Number(offset) };
  });
}

/**
 * `/delete-consumer/{group}/{instance}`: the instance leaves the group; like closing a Kafka
 * consumer, it first commits its positions if it commits automatically. Its partitions move on.
 */
export async function removeInstance(ctx: RestContext, scope: RequestScope, groupId: string, instanceId: string): Promise<void> {
  const key: GroupKey = { accountId: scope.accountId, groupId };
  await ctx.groups.locked(key, async (client) => {
    const member = await ctx.groups.member(client, key, instanceId);
    if (!member) throw new TributaryError('not_found', `consumer instance not found: ${instanceId} in group ${groupId}`);
    if (member.autoCommit) await ctx.groups.commitPositions(client, key, instanceId);
    await ctx.groups.remove(client, key, instanceId);
  });
}
