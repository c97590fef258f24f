import { randomInt } from 'node:crypto';
import type pg from 'pg';
import { TributaryError } from '../../errors.ts';
import type { LoggedEvent } from '../log.ts';
import { assignRoundRobin } from './assign.ts';
import type { RequestScope, RestContext } from './context.ts';
import { tpKey, type GroupKey, type Move } from './groups.ts';
import type { ConsumeRequest, ConsumerSettings, OffsetReset, TopicPartition } from './input.ts';
import { ResponseBudget, toMessage, type RestMessage } from './messages.ts';
import { longPoll, marksOf } from './poll.ts';

export interface ConsumeCall {
  groupId: string;
  instanceId: string;
  request: ConsumeRequest;
  /** From the Kafka-* headers; they only take effect when the instance is created. */
  settings: ConsumerSettings;
}

export interface ConsumeResult {
  messages: RestMessage[];
  /** Puts the positions back when the answer could not be delivered, so nothing is skipped. */
  rewind(): Promise<void>;
}

interface Plan {
  sessionTimeoutMs: number;
  positions: Array<TopicPartition & { position: string }>;
  syncIds: string[];
}

/**
 * `/consume/{group}/{instance}`: Kafka consumer-group semantics over the event log.
 *
 * - The instances of a group share the partitions of their topics (round-robin); an instance
 *   not seen within its session timeout is dropped by the next consume of another instance
 *   and its partitions move on, restarting from the group's committed offsets.
 * - Each instance has a position per partition it holds: the next offset it is handed.
 * - Auto-commit (the default, `Kafka-Enable-Auto-Commit`): the positions reached by what a
 *   consume returned are committed at the start of the instance's next consume (or commit,
 *   or removal), never at the moment they are handed out. A consumer that dies before asking
 *   again gets that batch again, in the same instance or another: at-least-once, as Kafka's
 *   auto-commit-on-poll. A partition taken away from an instance first has its handed-out
 *   position committed by that instance's next consume, if it commits automatically.
 * - With no committed offset, `Kafka-Auto-Offset-Reset` decides: latest (the default, as in
 *   Upstash and Kafka), earliest, or none (a 400).
 * - Per partition, messages come in offset order, and a position only moves forward past what
 *   was handed out (compare-and-set), so two answers never hold the same partition's messages
 *   for one holder.
 */
export async function consume(ctx: RestContext, scope: RequestScope, call: ConsumeCall): Promise<ConsumeResult> {
  const key: GroupKey = { accountId: scope.accountId, groupId: call.groupId };
  // What an instance stores is bounded: a few of the account's own topics, nothing else.
  if (call.request.topics.length > ctx.limits.maxTopicsPerMember) {
    throw new TributaryError('invalid_request', `a consumer instance may name at most ${ctx.limits.maxTopicsPerMember} topics`);
  }
  await ctx.topics.requireSubscribable(scope.accountId, call.request.topics);
  // The account's own syncs behind the topics, even those with no event yet, to wake on.
  const ownSyncs = await ctx.topics.ownSyncs(scope.accountId, call.request.topics);
  let first = true;
  let lastMoves: Move[] = [];
  // A waiting consume rejoins (refreshing its last-seen time) at least every third of its
  // session timeout, so that its own long poll never makes it look stale to the others.
  let sessionTimeoutMs = call.settings.sessionTimeoutMs;
  const sliceMs = () => Math.max(100, Math.min(ctx.limits.pollSliceMs, Math.floor(sessionTimeoutMs / 3)));
  const messages = await longPoll({ bus: ctx.bus, timeoutMs: call.request.timeoutMs, signal: scope.signal, sliceMs }, async () => {
    const plan = await ctx.groups.locked(key, (client) => rebalance(ctx, client, key, call, first));
    first = false;
    sessionTimeoutMs = plan.sessionTimeoutMs;
    const marks = marksOf(ctx.bus, [...ownSyncs, ...plan.syncIds]);
    const budget = new ResponseBudget(ctx.limits);
    const read: LoggedEvent[] = [];
    const moves: Move[] = [];
    // Start at a random partition so that a busy one cannot starve the others.
    const start = plan.positions.length > 0 ? randomInt(plan.positions.length) : 0;
    for (let i = 0; i < plan.positions.length && budget.remaining > 0; i++) {
      const held = plan.positions[(start + i) % plan.positions.length]!;
      const events = budget.take(await ctx.reader.byOffset(held.topic, held.partition, held.position, budget.remaining));
      if (events.length === 0) continue;
      moves.push({ topic: held.topic, partition: held.partition, from: held.position, to: (BigInt(events.at(-1)!.offset) + 1n).toString() });
      read.push(...events);
    }
    const moved = await ctx.groups.advance(key, call.instanceId, moves);
    lastMoves = moves.filter((m) => moved.has(tpKey(m)));
    return { items: read.filter((e) => moved.has(tpKey(e))).map(toMessage), marks };
  });
  const handedOut = lastMoves;
  return {
    messages,
    rewind: async () => {
      if (messages.length === 0) return;
      await ctx.groups.advance(
        key,
        call.instanceId,
        handedOut.map((m) => ({ topic: m.topic, partition: m.partition, from: m.to, to: m.from })),
      );
    },
  };
}

/** Under the group's lock: expire the stale, join, auto-commit, split the partitions, take ours. */
async function rebalance(ctx: RestContext, client: pg.PoolClient, key: GroupKey, call: ConsumeCall, first: boolean): Promise<Plan> {
  const { groups } = ctx;
  await groups.enter(client, key);
  // The stale go before the new instance is counted against the group's limit.
  await groups.expire(client, key, call.instanceId);
  const me = await groups.join(client, key, call.instanceId, call.request.topics, call.settings);
  if (first && me.autoCommit) await groups.commitPositions(client, key, call.instanceId);
  const members = await groups.members(client, key);
  // Every query here runs on the transaction's connection: a second one from the pool while
  // holding this one could exhaust the pool under load.
  const visible = await ctx.topics.visible(
    key.accountId,
    members.flatMap((m) => m.topics),
    client,
  );
  const partitions = new Map([...visible.values()].map((t) => [t.topic, t.partitions]));
  const mine = assignRoundRobin(members, partitions).get(call.instanceId) ?? [];

  const held = await groups.held(client, key, mine);
  const toTake = mine.filter((tp) => held.get(tpKey(tp))?.instanceId !== call.instanceId);
  const committed = await groups.committed(client, key, toTake);
  const taken: Array<TopicPartition & { position: string }> = [];
  for (const tp of toTake) {
    const position = committed.get(tpKey(tp)) ?? (await resetPosition(ctx, client, tp, me.autoOffsetReset, key.groupId));
    taken.push({ ...tp, position });
  }
  await groups.hold(client, key, call.instanceId, taken);
  await groups.release(client, key, call.instanceId, mine);

  const takenAt = new Map(taken.map((t) => [tpKey(t), t.position]));
  return {
    sessionTimeoutMs: me.sessionTimeoutMs,
    positions: mine.map((tp) => ({ ...tp, position: takenAt.get(tpKey(tp)) ?? held.get(tpKey(tp))!.position })),
    syncIds: [...new Set(mine.map((tp) => visible.get(tp.topic)!.syncId))],
  };
}

async function resetPosition(ctx: RestContext, client: pg.PoolClient, tp: TopicPartition, reset: OffsetReset, groupId: string): Promise<string> {
  if (reset === 'none') {
    throw new TributaryError(
      'invalid_request',
      `group ${groupId} has no committed offset for ${tp.topic} partition ${tp.partition} and Kafka-Auto-Offset-Reset is none`,
    );
  }
  const offsets = await ctx.topics.partitionOffsets(tp.topic, tp.partition, client);
  return reset === 'earliest' ? offsets.earliest : offsets.next;
}
