import type Router from '@koa/router';
import type { Context } from 'koa';
import { BACKFILL_STATES, type Backfill, type BackfillState, BackfillStore } from '../../backfill/store.ts';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, notFound } from '../../errors.ts';
import { topicName } from '../../events/log.ts';
import { WebhookStore } from '../../events/webhooks/destinations.ts';
import { readJson, validate } from '../body.ts';
import { collectionsOf } from '../collections.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { time } from '../views.ts';
import { z } from '../zod.ts';
import { SYNC_NOT_FOUND, findSync, syncParams } from './syncs.ts';
import type { WebhookApiOptions } from './webhooks.ts';

const MAX_COLLECTIONS = 500;

const createBackfillBody = z
  .object({
    collections: z
      .array(z.string().min(1).max(300))
      .min(1, 'at least one collection; leave it out for every collection')
      .max(MAX_COLLECTIONS)
      .optional()
      .describe('The collections to read (a topic is `svc.<sync id>.<collection>`); every one of the sync (or of the webhook) when left out'),
    webhook: z
      .string()
      .max(100)
      .optional()
      .describe("Send the reads to this webhook (`wh_…`) alone, not to the topics; without it, to every consumer of the collections' topics"),
  })
  .strict()
  .openapi('CreateBackfill');

export const backfillAnswer = z
  .object({
    id: z.string().describe('`bf_…`'),
    state: z
      .enum(BACKFILL_STATES as [BackfillState, ...BackfillState[]])
      .describe('`running` (or waiting its turn: one runs at a time per sync), `done`, `canceled` or `failed`'),
    reason: z
      .enum(['requested', 'slot_lost'])
      .describe(
        '`requested` through this API; `slot_lost`: the re-read of every collection after a lost replication slot (docs/events.md#gaps-a-lost-replication-slot), which no backfill limit counts',
      ),
    collections: z.array(z.string()),
    webhook: z.string().nullable().describe('The webhook the reads go to alone; null: the topics'),
    rows: z.number().int().describe('Rows read into the stream so far'),
    collection: z.string().nullable().describe('The collection being read now (null once finished)'),
    error: z.string().nullable().describe('Why it failed'),
    created_at: time,
    updated_at: time,
    finished_at: time.nullable(),
  })
  .strict()
  .openapi('Backfill');

export function backfillView(backfill: Backfill): z.infer<typeof backfillAnswer> {
  return {
    id: backfill.id,
    state: backfill.state,
    reason: backfill.reason,
    collections: backfill.collections,
    webhook: backfill.destinationId,
    rows: backfill.rows,
    collection: backfill.state === 'running' ? (backfill.collections[backfill.position] ?? null) : null,
    error: backfill.error,
    created_at: backfill.createdAt.toISOString(),
    updated_at: backfill.updatedAt.toISOString(),
    finished_at: backfill.finishedAt?.toISOString() ?? null,
  };
}

const backfillParams = syncParams.extend({ bid: z.string().describe('The backfill (`bf_…`)') });
const BACKFILL_NOT_FOUND = `${SYNC_NOT_FOUND}; or no such backfill of it`;

const listOf = (names: Iterable<string>) => {
  const all = [...names].sort();
  return all.length > 20 ? `${all.slice(0, 20).join(', ')}, … (${all.length} in all)` : all.join(', ');
};

/**
 * The collections a backfill reads: those named (each a collection of the sync, and of the
 * webhook's topics when it has one), else every one of the webhook's or the sync's.
 */
export async function backfillCollections(api: ApiOptions, sync: SyncRecord, named: string[] | undefined, webhookTopics?: string[]): Promise<string[]> {
  const existing = await collectionsOf(api, sync);
  const taken = webhookTopics && new Set(webhookTopics);
  if (named) {
    const unique = [...new Set(named)];
    const unknown = unique.filter((c) => !existing.has(c));
    if (unknown.length > 0) {
      throw new TributaryError(
        'invalid_request',
        `collections: ${listOf(unknown)} ${unknown.length === 1 ? 'is not a collection' : 'are not collections'} of this sync (it has ${listOf(existing.keys()) || 'none yet'})`,
      );
    }
    const untaken = taken ? unique.filter((c) => !taken.has(topicName(sync.id, c))) : [];
    if (untaken.length > 0) throw new TributaryError('invalid_request', `collections: the webhook does not take ${listOf(untaken)} (not among its topics)`);
    return unique;
  }
  const all = [...existing.keys()].filter((c) => !taken || taken.has(topicName(sync.id, c))).sort();
  if (all.length === 0)
    throw new TributaryError(
      'conflict',
      taken ? "none of the webhook's topics has a table yet; nothing to read" : 'the sync has no tables yet; nothing to read',
    );
  return all;
}

export function backfillRoutes(router: Router, api: ApiOptions & WebhookApiOptions, doc: ApiDocument): void {
  const store = new BackfillStore(api.pool, api.backfillLimits);

  const findBackfill = async (ctx: Context) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const backfill = await store.get(sync.id, ctx.params.bid!);
    if (!backfill) throw notFound(`backfill ${ctx.params.bid}`);
    return { sync, backfill };
  };

  doc.route({
    method: 'post',
    path: '/api/syncs/:id/backfills',
    operationId: 'createBackfill',
    tag: 'backfills',
    summary: 'Read the current rows of collections into the event stream',
    description:
      'Each current row becomes one event with `"event":"read"` and `data` the row as it is, interleaved with live changes so that a read never overtakes a newer change of its record. The reads go to the collections\' topics (REST, Kafka and their webhooks), or with `webhook` to that webhook alone. A sync\'s backfills run one at a time, oldest first; a restart goes on where the last one stood.',
    access: 'token',
    params: syncParams,
    body: { schema: createBackfillBody, required: false, description: 'Optional: without a body, every collection of the sync, to every consumer' },
    answers: { 202: { description: 'The backfill, running (or waiting its turn)', schema: backfillAnswer } },
    errors: {
      400: 'A collection the sync does not have, or one the webhook does not take',
      404: `${SYNC_NOT_FOUND}; or no such webhook of it`,
      409: 'The sync has no tables yet, or 10 backfills running or waiting',
      429: 'The account has asked for its backfills of the last hour, or its backfills have read their rows of the last day (the message names the bound; Retry-After says when)',
      503: 'A webhook was named and webhooks are not configured on this server',
    },
  });
  router.post('/api/syncs/:id/backfills', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const body = await readJson(ctx, api.bodyLimit);
    const input = body === undefined ? {} : validate(createBackfillBody, body);
    let topics: string[] | undefined;
    if (input.webhook !== undefined) {
      if (!api.box) throw new TributaryError('unavailable', 'webhooks are not configured on this server');
      const destination = await new WebhookStore(api.pool, api.box).get(sync.id, input.webhook);
      if (!destination) throw notFound(`webhook ${input.webhook} of sync ${sync.id}`);
      topics = destination.topics;
    }
    const collections = await backfillCollections(api, sync, input.collections, topics);
    const backfill = await store.create({ syncId: sync.id, accountId: sync.accountId, collections, destinationId: input.webhook ?? null });
    api.logger.info({ sync: sync.id, backfill: backfill.id, collections: collections.length, webhook: input.webhook }, 'backfill requested');
    ctx.status = 202;
    ctx.body = backfillView(backfill);
  });

  doc.route({
    method: 'get',
    path: '/api/syncs/:id/backfills',
    operationId: 'listBackfills',
    tag: 'backfills',
    summary: "List a sync's backfills, newest first",
    description: 'Finished ones are kept for 7 days, the newest 100 at most.',
    access: 'token',
    params: syncParams,
    answers: { 200: { description: 'The backfills', schema: z.object({ data: z.array(backfillAnswer) }).strict() } },
    errors: { 404: SYNC_NOT_FOUND },
  });
  router.get('/api/syncs/:id/backfills', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    ctx.body = { data: (await store.list(sync.id)).map(backfillView) };
  });

  doc.route({
    method: 'get',
    path: '/api/syncs/:id/backfills/:bid',
    operationId: 'getBackfill',
    tag: 'backfills',
    summary: 'Show a backfill and its progress',
    access: 'token',
    params: backfillParams,
    answers: { 200: { description: 'The backfill', schema: backfillAnswer } },
    errors: { 404: BACKFILL_NOT_FOUND },
  });
  router.get('/api/syncs/:id/backfills/:bid', async (ctx) => {
    ctx.body = backfillView((await findBackfill(ctx)).backfill);
  });

  doc.route({
    method: 'delete',
    path: '/api/syncs/:id/backfills/:bid',
    operationId: 'cancelBackfill',
    tag: 'backfills',
    summary: 'Cancel a running backfill',
    description: 'It stops before its next chunk; the reads already sent stay in the stream.',
    access: 'token',
    params: backfillParams,
    answers: { 200: { description: 'The backfill, canceled', schema: backfillAnswer } },
    errors: { 404: BACKFILL_NOT_FOUND, 409: 'The backfill has finished already' },
  });
  router.delete('/api/syncs/:id/backfills/:bid', async (ctx) => {
    const { sync, backfill } = await findBackfill(ctx);
    if (backfill.state !== 'running') throw new TributaryError('conflict', `backfill ${backfill.id} is ${backfill.state} already; nothing to cancel`);
    const canceled = await store.cancel(sync.id, backfill.id);
    if (!canceled) throw notFound(`backfill ${backfill.id}`);
    if (canceled.state !== 'canceled') throw new TributaryError('conflict', `backfill ${backfill.id} is ${canceled.state} already; nothing to cancel`);
    api.logger.info({ sync: sync.id, backfill: backfill.id }, 'backfill canceled');
    ctx.body = backfillView(canceled);
  });
}
