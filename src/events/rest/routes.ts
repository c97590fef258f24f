import type http from 'node:http';
import { TributaryError } from '../../errors.ts';
import { listConsumers, listTopics, partitionOffsets } from './admin.ts';
import { commit, committed, removeInstance } from './commit.ts';
import { consume } from './consume.ts';
import type { RequestScope, RestContext } from './context.ts';
import { fetchMessages } from './fetch.ts';
import { SUCCESS } from './http.ts';
import { commitRequest, committedRequest, consumeRequest, consumerSettings, fetchRequest, name, oneOrMany, queryTimeout, topicPartition } from './input.ts';

export interface Call {
  req: http.IncomingMessage;
  /** The `:name` parts of the path, decoded, in order. */
  params: string[];
  query: URLSearchParams;
  scope: RequestScope;
  /** Reads the body (size-limited) as JSON; undefined when empty. */
  body(): Promise<unknown>;
}

export interface Answer {
  body: unknown;
  /** Called when the answer could not be handed to the client. */
  undelivered?: () => Promise<void>;
}

export interface Route {
  path: string[];
  methods: string[];
  /** Answers without credentials. */
  public?: boolean;
  /** May wait for events (`timeout`): counts against the account's open long polls. */
  longPoll?: boolean;
  run(ctx: RestContext, call: Call): Promise<Answer>;
}

const groupAndInstance = (call: Call) => ({
  groupId: name(call.params[0], 'the consumer group in the path'),
  instanceId: name(call.params[1], 'the instance id in the path'),
});

async function consumeRoute(ctx: RestContext, call: Call): Promise<Answer> {
  const { groupId, instanceId } = groupAndInstance(call);
  const settings = consumerSettings(call.req, ctx.limits);
  const request = consumeRequest(await call.body(), call.params[2], queryTimeout(call.query, ctx.limits), ctx.limits);
  const result = await consume(ctx, call.scope, { groupId, instanceId, request, settings });
  return { body: result.messages, undelivered: result.rewind };
}

/** Upstash's endpoints, as the @upstash/kafka client calls them (it POSTs nearly everything). */
export const routes: Route[] = [
  {
    path: ['healthz'],
    methods: ['GET'],
    public: true,
    run: async (ctx) => {
      try {
        await ctx.pool.query('SELECT 1');
      } catch (cause) {
        throw new TributaryError('unavailable', 'the control database is unreachable', { cause, expose: true });
      }
      return { body: { ok: true } };
    },
  },
  {
    path: ['fetch'],
    methods: ['GET', 'POST'],
    longPoll: true,
    run: async (ctx, call) => ({ body: await fetchMessages(ctx, call.scope, fetchRequest(await call.body(), ctx.limits)) }),
  },
  { path: ['consume', ':group', ':instance'], methods: ['GET', 'POST'], longPoll: true, run: consumeRoute },
  { path: ['consume', ':group', ':instance', ':topic'], methods: ['GET', 'POST'], longPoll: true, run: consumeRoute },
  {
    path: ['commit', ':group', ':instance'],
    methods: ['GET', 'POST'],
    run: async (ctx, call) => {
      const { groupId, instanceId } = groupAndInstance(call);
      await commit(ctx, call.scope, groupId, instanceId, commitRequest(await call.body(), ctx.limits));
      return { body: SUCCESS };
    },
  },
  {
    path: ['committed', ':group', ':instance'],
    methods: ['GET', 'POST'],
    run: async (ctx, call) => {
      const { groupId } = groupAndInstance(call);
      queryTimeout(call.query, ctx.limits); // taken for Upstash's shape; the answer never waits
      return { body: await committed(ctx, call.scope, groupId, committedRequest(await call.body(), ctx.limits)) };
    },
  },
  {
    path: ['offsets', ':timestamp'],
    methods: ['GET', 'POST'],
    run: async (ctx, call) => {
      const body = await call.body();
      if (body === undefined) throw new TributaryError('invalid_request', 'the request needs a body: {"topic","partition"} or an array of them');
      const wanted = oneOrMany(body, ctx.limits, 'topicPartitions', topicPartition);
      return { body: await partitionOffsets(ctx, call.scope, call.params[0]!, wanted) };
    },
  },
  { path: ['topics'], methods: ['GET'], run: async (ctx, call) => ({ body: await listTopics(ctx, call.scope) }) },
  { path: ['consumers'], methods: ['GET'], run: async (ctx, call) => ({ body: await listConsumers(ctx, call.scope) }) },
  {
    path: ['delete-consumer', ':group', ':instance'],
    methods: ['POST', 'DELETE'],
    run: async (ctx, call) => {
      const { groupId, instanceId } = groupAndInstance(call);
      await removeInstance(ctx, call.scope, groupId, instanceId);
      return { body: SUCCESS };
    },
  },
];
