import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { SecretBox } from '../../control/secrets.ts';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, notFound } from '../../errors.ts';
import { assertPublicDestination, type LookupAll } from '../../http/address.ts';
import { DELIVERY_STATUSES, DeliveryLog, type DeliveryRecord, type DeliveryStatus } from '../../events/webhooks/deliveries.ts';
import { WebhookStore, wakeDeliverer, type WebhookDestination } from '../../events/webhooks/destinations.ts';
import { readJson, validate } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import { findSync } from './syncs.ts';

/** What the webhook routes need beyond ApiOptions; main.ts passes them to createApiApp. */
export interface WebhookApiOptions {
  /** Seals destination secrets (the same SecretBox as everything else). Without it the routes answer 503. */
  box?: SecretBox;
  /** config.webhookAllowPrivate (TRIBUTARY_WEBHOOK_ALLOW_PRIVATE=1): accept loopback and private destinations. */
  webhookAllowPrivate?: boolean;
  /** Name resolution for the public-address check; the system resolver by default. */
  webhookLookup?: LookupAll;
}

export const MAX_WEBHOOKS_PER_SYNC = 25;
export const MAX_TOPICS_PER_WEBHOOK = 100;
const MAX_REPLAY_IDS = 1000;

const destinationUrl = z
  .string()
  .max(2048)
  .superRefine((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be an absolute http:// or https:// URL' });
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be http:// or https:// (got ${url.protocol.replace(/:$/, '')})` });
    } else if (url.username || url.password) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must not contain credentials (user:password@); put a token in the path or query instead' });
    } else if (!url.hostname) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must name a host' });
    }
  });

const createWebhook = (sync: SyncRecord) => {
  const prefix = `svc.${sync.id}.`;
  return z
    .object({
      url: destinationUrl,
      topics: z
        .array(
          z
            .string()
            .max(300)
            .refine((topic) => topic.startsWith(prefix), `must be a topic of this sync: ${prefix}<collection>`)
            .refine(
              (topic) => !topic.startsWith(prefix) || /^[^\s\p{Cc}*]+$/u.test(topic.slice(prefix.length)),
              `must name a collection after ${prefix}`,
            ),
        )
        .min(1, 'at least one topic')
        .max(MAX_TOPICS_PER_WEBHOOK, `at most ${MAX_TOPICS_PER_WEBHOOK} topics`),
    })
    .strict();
};

const MAX_BIGINT = 9223372036854775807n;

/** A delivery id: a positive bigint, so at most 9223372036854775807 (`after` may also be 0). */
function isDeliveryId(text: string, options: { zero?: boolean } = {}): boolean {
  if (!/^\d{1,19}$/.test(text)) return false;
  const value = BigInt(text);
  return value <= MAX_BIGINT && (value > 0n || options.zero === true);
}

const deliveryId = z.string().refine((id) => isDeliveryId(id), 'must be a delivery id');

const replayBody = z.object({ ids: z.array(deliveryId).min(1).max(MAX_REPLAY_IDS).optional() }).strict();


export function webhookView(destination: WebhookDestination) {
  return {
    id: destination.id,
    url: destination.url,
    topics: destination.topics,
    created_at: destination.createdAt.toISOString(),
  };
}

function deliveryView(delivery: DeliveryRecord) {
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

function queryText(ctx: Context, name: string): string | undefined {
  const value = ctx.query[name];
  if (Array.isArray(value)) throw new TributaryError('invalid_request', `${name}: give it once`);
  return value;
}

function queryInt(ctx: Context, name: string, fallback: number, max: number): number {
  const raw = queryText(ctx, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new TributaryError('invalid_request', `${name}: must be a whole number from 1 to ${max}`);
  }
  return Number(raw);
}

export function webhookRoutes(router: Router, api: ApiOptions & WebhookApiOptions): void {
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

  router.post('/api/syncs/:id/webhooks', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const webhooks = store();
    const input = validate(createWebhook(sync), await readJson(ctx, api.bodyLimit));
    const url = new URL(input.url);
    if (!api.webhookAllowPrivate) await assertPublicDestination(url, api.webhookLookup);
    const created = await webhooks.create({
      syncId: sync.id,
      accountId: sync.accountId,
      url: input.url,
      topics: [...new Set(input.topics)],
      max: MAX_WEBHOOKS_PER_SYNC,
    });
    if (!created) throw new TributaryError('conflict', `a sync can have at most ${MAX_WEBHOOKS_PER_SYNC} webhooks; delete one first`);
    api.logger.info({ sync: sync.id, webhook: created.destination.id }, 'webhook created');
    ctx.status = 201;
    // The only answer that carries the secret.
    ctx.body = { ...webhookView(created.destination), secret: created.secret.reveal() };
  });

  router.get('/api/syncs/:id/webhooks', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    ctx.body = { data: (await store().list(sync.id)).map(webhookView) };
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
        last_delivered_at: destination.lastDeliveredAt?.toISOString() ?? null,
        last_failed_at: destination.lastFailedAt?.toISOString() ?? null,
      },
    };
  });

  router.delete('/api/syncs/:id/webhooks/:wid', async (ctx) => {
    const { sync, destination } = await findWebhook(ctx);
    if (!(await store().remove(sync.id, destination.id))) throw notFound(`webhook ${destination.id}`);
    api.logger.info({ sync: sync.id, webhook: destination.id }, 'webhook deleted');
    ctx.body = { id: destination.id, deleted: true };
  });

  router.get('/api/syncs/:id/webhooks/:wid/deliveries', async (ctx) => {
    const { destination } = await findWebhook(ctx);
    const status = queryText(ctx, 'status');
    if (status !== undefined && !DELIVERY_STATUSES.includes(status as DeliveryStatus)) {
      throw new TributaryError('invalid_request', `status: must be one of ${DELIVERY_STATUSES.join(', ')}`);
    }
    const after = queryText(ctx, 'after');
    if (after !== undefined && !isDeliveryId(after, { zero: true })) throw new TributaryError('invalid_request', 'after: must be a delivery id (at most 9223372036854775807)');
    const page = await deliveries.list(destination.id, {
      ...(status ? { status: status as DeliveryStatus } : {}),
      ...(after ? { after } : {}),
      limit: queryInt(ctx, 'limit', 100, 1000),
    });
    ctx.body = { data: page.data.map(deliveryView), has_more: page.hasMore };
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
