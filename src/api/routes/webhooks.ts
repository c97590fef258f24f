import type Router from '@koa/router';
import type { Context } from 'koa';
import type { SecretBox } from '../../control/secrets.ts';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, notFound } from '../../errors.ts';
import { assertPublicDestination, type LookupAll } from '../../http/address.ts';
import { DELIVERY_STATUSES, DeliveryLog, type DeliveryRecord, type DeliveryStatus } from '../../events/webhooks/deliveries.ts';
import { WebhookStore, wakeDeliverer } from '../../events/webhooks/destinations.ts';
import { queryErrors, readJson, validate, validateQuery, wholeNumber } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { time } from '../views.ts';
import { checkFilterColumns, normalFilter } from '../webhook-filter.ts';
import { z } from '../zod.ts';
import { BackfillStore } from '../../backfill/store.ts';
import { backfillCollections, backfillView } from './backfills.ts';
import { SYNC_NOT_FOUND, findSync, syncParams } from './syncs.ts';
import {
  checkTopics,
  createdWebhookAnswer,
  destinationUrl,
  filterField,
  maxPerSecond,
  topicList,
  webhookAnswer,
  webhookFields,
  webhookParams,
  webhookView,
} from './webhook-shapes.ts';

/** What the webhook routes need beyond ApiOptions; main.ts passes them to createApiApp. */
export interface WebhookApiOptions {
  /** Seals destination secrets (the same SecretBox as everything else). Without it the routes answer 503. */
  box?: SecretBox;
  /** config.webhookAllowPrivate (TRIBUTARY_WEBHOOK_ALLOW_PRIVATE=1): accept loopback and private destinations. */
  webhookAllowPrivate?: boolean;
  /** Name resolution for the public-address check; the system resolver by default. */
  webhookLookup?: LookupAll;
  /** config.eventRetentionMs: how far back a webhook can be recovered (7 days when not given). */
  eventRetentionMs?: number;
}

export const MAX_WEBHOOKS_PER_SYNC = 25;
const MAX_REPLAY_IDS = 1000;

const createWebhookBody = z
  .object({
    url: destinationUrl,
    topics: topicList,
    filter: filterField.optional(),
    max_per_second: maxPerSecond.optional(),
    backfill: z
      .boolean()
      .optional()
      .describe("`true`: first a backfill of its topics' current rows, for this webhook alone (docs/events.md, Backfills on demand)"),
  })
  .strict()
  .openapi('CreateWebhook');

/** The create request for one sync: its topics must be that sync's. */
const createWebhook = (sync: SyncRecord) => createWebhookBody.superRefine((input, ctx) => checkTopics(sync, input.topics, ctx));

const MAX_BIGINT = 9223372036854775807n;

/** A delivery id: a positive bigint, so at most 9223372036854775807 (`after` may also be 0). */
function isDeliveryId(text: string, options: { zero?: boolean } = {}): boolean {
  if (!/^\d{1,19}$/.test(text)) return false;
  const value = BigInt(text);
  return value <= MAX_BIGINT && (value > 0n || options.zero === true);
}

const deliveryId = z
  .string()
  .refine((id) => isDeliveryId(id), 'must be a delivery id')
  .describe('A delivery id: digits (a positive 64-bit integer)');

const replayBody = z
  .object({ ids: z.array(deliveryId).min(1).max(MAX_REPLAY_IDS).optional().describe('Only these deliveries; without it, every exhausted one') })
  .strict()
  .openapi('ReplayDeliveries');

const afterMessage = 'must be a delivery id (at most 9223372036854775807)';
const statusMessage = `must be one of ${DELIVERY_STATUSES.join(', ')}`;
const deliveriesQuery = z.object({
  status: z
    .enum(DELIVERY_STATUSES as [DeliveryStatus, ...DeliveryStatus[]], { errorMap: queryErrors(statusMessage) })
    .optional()
    .describe('Only deliveries in this state'),
  after: z
    .string({ errorMap: queryErrors(afterMessage) })
    .refine((id) => isDeliveryId(id, { zero: true }), afterMessage)
    .optional()
    .describe('Deliveries after this id (the last of the previous page)'),
  limit: wholeNumber(1, 1000).optional().describe('At most this many (default 100)'),
});

const webhookDetailAnswer = z
  .object({
    ...webhookFields,
    deliveries: z
      .object({
        delivered: z.number().int().describe('Delivered at any attempt, since creation'),
        failed_attempts: z.number().int(),
        pending: z.number().int(),
        retrying: z.number().int(),
        exhausted: z.number().int().describe('Given up on; these can be replayed'),
        dropped: z.number().int().describe('Exhausted deliveries dropped, oldest first, past the cap of 10,000 kept per webhook'),
        last_delivered_at: time.nullable(),
        last_failed_at: time.nullable(),
      })
      .strict(),
  })
  .strict()
  .openapi('WebhookWithDeliveries');

const deliveryAnswer = z
  .object({
    id: z.string(),
    event_id: z.string().describe("The event's idempotency key (the `webhook-id` header)"),
    topic: z.string(),
    record_id: z.string(),
    seq: z.string().describe("The event's position in the event log"),
    event_created_at: time,
    status: z.enum(DELIVERY_STATUSES as [DeliveryStatus, ...DeliveryStatus[]]),
    attempts: z.number().int(),
    replays: z.number().int(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    first_attempt_at: time.nullable(),
    last_attempt_at: time.nullable(),
    next_attempt_at: time.nullable(),
    finished_at: time.nullable(),
  })
  .strict()
  .openapi('Delivery');

function deliveryView(delivery: DeliveryRecord): z.infer<typeof deliveryAnswer> {
  const iso = (date: Date | null) => date?.toISOString() ?? null;
  return {
    id: delivery.id,
    event_id: delivery.eventKey,
    topic: delivery.topic,
    record_id: delivery.recordId,
    seq: delivery.seq,
    event_created_at: delivery.eventCreatedAt.toISOString(),
    status: delivery.status,
    attempts: delivery.attempts,
    replays: delivery.replays,
    last_status_code: delivery.lastStatusCode,
    last_error: delivery.lastError,
    first_attempt_at: iso(delivery.firstAttemptAt),
    last_attempt_at: iso(delivery.lastAttemptAt),
    next_attempt_at: iso(delivery.nextAttemptAt),
    finished_at: iso(delivery.finishedAt),
  };
}

const WEBHOOK_NOT_FOUND = `${SYNC_NOT_FOUND}; or no such webhook of it`;
const UNCONFIGURED = 'Webhooks are not configured on this server';

export function webhookRoutes(router: Router, api: ApiOptions & WebhookApiOptions, doc: ApiDocument): void {
  const deliveries = new DeliveryLog(api.pool);
  const store = (): WebhookStore => {
    if (!api.box) throw new TributaryError('unavailable', 'webhooks are not configured on this server');
    return new WebhookStore(api.pool, api.box);
  };

  const findWebhook = async (ctx: Context) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const destination = await store().get(sync.id, ctx.params.wid!);
    if (!destination) throw notFound(`webhook ${ctx.params.wid}`);
    return { sync, destination };
  };

  doc.route({
    method: 'post',
    path: '/api/syncs/:id/webhooks',
    operationId: 'createWebhook',
    tag: 'webhooks',
    summary: 'Add a webhook to a sync',
    description: `Events of the topics are POSTed to the URL, signed per Standard Webhooks with the secret answered here (only here). At most ${MAX_WEBHOOKS_PER_SYNC} webhooks a sync, and the account's \`max_webhooks\` in all.`,
    access: 'token',
    params: syncParams,
    body: { schema: createWebhookBody },
    answers: { 201: { description: 'The webhook and its signing secret', schema: createdWebhookAnswer } },
    errors: {
      400: "A topic that is not `svc.<this sync id>.<collection>`, or a filter naming an unknown event kind or a column none of the topics' collections has",
      404: SYNC_NOT_FOUND,
      409: `The sync has ${MAX_WEBHOOKS_PER_SYNC} webhooks already, or the account its \`max_webhooks\` (100 by default); or \`backfill\` and none of the topics has a table yet`,
      429: '`backfill`, and the account is past its backfills of the last hour or rows of the last day (nothing is made)',
      422: "The URL's host has no public address (or could not be resolved)",
      503: `${UNCONFIGURED}; or the sync database could not be read to check the filter's columns`,
    },
  });
  router.post('/api/syncs/:id/webhooks', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const webhooks = store();
    const input = validate(createWebhook(sync), await readJson(ctx, api.bodyLimit));
    const topics = [...new Set(input.topics)];
    const filter = input.filter ? normalFilter(input.filter) : null;
    await checkFilterColumns(api, sync, topics, filter);
    if (!api.webhookAllowPrivate) await assertPublicDestination(new URL(input.url), api.webhookLookup);
    // Checked before anything is made: a backfill with nothing to read is a 409, and no webhook;
    // one past the account's backfill bounds a 429, and no webhook.
    const backfills = new BackfillStore(api.pool, api.backfillLimits);
    const collections = input.backfill ? await backfillCollections(api, sync, undefined, topics) : undefined;
    if (collections) await backfills.withinAccountLimits(api.pool, sync.accountId);
    const created = await webhooks.create({
      syncId: sync.id,
      accountId: sync.accountId,
      url: input.url,
      topics,
      max: MAX_WEBHOOKS_PER_SYNC,
      filter,
      maxPerSecond: input.max_per_second ?? null,
    });
    const backfill =
      collections && (await backfills.create({ syncId: sync.id, accountId: sync.accountId, collections, destinationId: created.destination.id }));
    api.logger.info({ sync: sync.id, webhook: created.destination.id, backfill: backfill?.id }, 'webhook created');
    ctx.status = 201;
    // The only answer that carries the secret.
    ctx.body = {
      ...webhookView(created.destination),
      secret: created.secret.reveal(),
      ...(backfill ? { backfill: backfillView(backfill) } : {}),
    } satisfies z.infer<typeof createdWebhookAnswer>;
  });

  doc.route({
    method: 'get',
    path: '/api/syncs/:id/webhooks',
    operationId: 'listWebhooks',
    tag: 'webhooks',
    summary: "List a sync's webhooks",
    access: 'token',
    params: syncParams,
    answers: { 200: { description: 'The webhooks (without their secrets)', schema: z.object({ data: z.array(webhookAnswer) }).strict() } },
    errors: { 404: SYNC_NOT_FOUND, 503: UNCONFIGURED },
  });
  router.get('/api/syncs/:id/webhooks', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    ctx.body = { data: (await store().list(sync.id)).map((destination) => webhookView(destination)) };
  });

  doc.route({
    method: 'get',
    path: '/api/syncs/:id/webhooks/:wid',
    operationId: 'getWebhook',
    tag: 'webhooks',
    summary: 'Show a webhook with its delivery counts',
    access: 'token',
    params: webhookParams,
    answers: { 200: { description: 'The webhook', schema: webhookDetailAnswer } },
    errors: { 404: WEBHOOK_NOT_FOUND, 503: UNCONFIGURED },
  });
  router.get('/api/syncs/:id/webhooks/:wid', async (ctx) => {
    const { destination } = await findWebhook(ctx);
    const counts = await deliveries.counts(destination.id);
    ctx.body = {
      ...webhookView(destination),
      deliveries: {
        // Delivered at any attempt, since creation (first-try deliveries keep no row).
        delivered: Number(destination.deliveredCount),
        failed_attempts: Number(destination.failedAttempts),
        pending: counts.pending,
        retrying: counts.retrying,
        exhausted: counts.exhausted,
        dropped: Number(destination.droppedCount),
        last_delivered_at: destination.lastDeliveredAt?.toISOString() ?? null,
        last_failed_at: destination.lastFailedAt?.toISOString() ?? null,
      },
    } satisfies z.infer<typeof webhookDetailAnswer>;
  });

  doc.route({
    method: 'delete',
    path: '/api/syncs/:id/webhooks/:wid',
    operationId: 'deleteWebhook',
    tag: 'webhooks',
    summary: 'Delete a webhook',
    access: 'token',
    params: webhookParams,
    answers: { 200: { description: 'The webhook is gone', schema: z.object({ id: z.string(), deleted: z.literal(true) }).strict() } },
    errors: { 404: WEBHOOK_NOT_FOUND, 503: UNCONFIGURED },
  });
  router.delete('/api/syncs/:id/webhooks/:wid', async (ctx) => {
    const { sync, destination } = await findWebhook(ctx);
    if (!(await store().remove(sync.id, destination.id))) throw notFound(`webhook ${destination.id}`);
    api.logger.info({ sync: sync.id, webhook: destination.id }, 'webhook deleted');
    ctx.body = { id: destination.id, deleted: true };
  });

  doc.route({
    method: 'get',
    path: '/api/syncs/:id/webhooks/:wid/deliveries',
    operationId: 'listDeliveries',
    tag: 'webhooks',
    summary: "List a webhook's deliveries",
    description: 'Deliveries that needed more than one attempt, oldest first (a first-try delivery keeps no row), a page at a time.',
    access: 'token',
    params: webhookParams,
    query: deliveriesQuery,
    answers: {
      200: {
        description: 'A page of deliveries',
        schema: z.object({ data: z.array(deliveryAnswer), has_more: z.boolean().describe('More follow: ask again with `after` set to the last id') }).strict(),
      },
    },
    errors: { 404: WEBHOOK_NOT_FOUND, 503: UNCONFIGURED },
  });
  router.get('/api/syncs/:id/webhooks/:wid/deliveries', async (ctx) => {
    const { destination } = await findWebhook(ctx);
    const { status, after, limit } = validateQuery(deliveriesQuery, ctx);
    const page = await deliveries.list(destination.id, {
      ...(status ? { status } : {}),
      ...(after ? { after } : {}),
      limit: limit ?? 100,
    });
    ctx.body = { data: page.data.map(deliveryView), has_more: page.hasMore };
  });

  doc.route({
    method: 'post',
    path: '/api/syncs/:id/webhooks/:wid/deliveries/replay',
    operationId: 'replayDeliveries',
    tag: 'webhooks',
    summary: 'Replay exhausted deliveries',
    description: 'Sends exhausted deliveries again (all of them, or those named); those waiting out a back-off are tried at once.',
    access: 'token',
    params: webhookParams,
    body: { schema: replayBody, required: false, description: 'Optional: without a body, every exhausted delivery is replayed' },
    answers: {
      202: {
        description: 'Replays are under way',
        schema: z
          .object({
            replayed: z.number().int(),
            ids: z.array(z.string()).describe('The exhausted deliveries sent again'),
            retried_now: z
              .array(z.string())
              .optional()
              .describe('Deliveries that were waiting out a back-off, tried now (attempts kept); only when there are any'),
          })
          .strict(),
      },
    },
    errors: {
      404: `${WEBHOOK_NOT_FOUND}; or a named delivery is not one of the webhook's`,
      409: 'A named delivery is neither exhausted nor retrying',
      503: UNCONFIGURED,
    },
  });
  router.post('/api/syncs/:id/webhooks/:wid/deliveries/replay', async (ctx) => {
    const { sync, destination } = await findWebhook(ctx);
    const body = await readJson(ctx, api.bodyLimit);
    const input = body === undefined ? {} : validate(replayBody, body);
    const ids = input.ids ? [...new Set(input.ids)] : undefined;
    if (ids) {
      const statuses = await deliveries.statusOf(destination.id, ids);
      const missing = ids.filter((id) => !statuses.has(id));
      if (missing.length > 0) throw notFound(`deliveries ${missing.slice(0, 10).join(', ')} of webhook ${destination.id}`);
      const busy = ids.filter((id) => statuses.get(id) !== 'exhausted' && statuses.get(id) !== 'retrying');
      if (busy.length > 0) {
        const named = busy.slice(0, 10).map((id) => `${id} is ${statuses.get(id)}`);
        throw new TributaryError('conflict', `only exhausted deliveries can be replayed: ${named.join(', ')}`);
      }
    }
    const { replayed, retried } = await deliveries.replay(destination.id, ids);
    if (replayed.length + retried.length > 0) await wakeDeliverer(api.pool, sync.id);
    api.logger.info({ sync: sync.id, webhook: destination.id, count: replayed.length, retried: retried.length }, 'webhook deliveries replayed');
    ctx.status = 202;
    // Deliveries that were waiting out a back-off are tried now (attempts kept): listed when there are any.
    ctx.body = { replayed: replayed.length, ids: replayed, ...(retried.length > 0 ? { retried_now: retried } : {}) };
  });
}
