import type Router from '@koa/router';
import type { Context } from 'koa';
import { TributaryError, notFound } from '../../errors.ts';
import { DestinationControls } from '../../events/webhooks/destination-controls.ts';
import { WebhookStore } from '../../events/webhooks/destinations.ts';
import { assertPublicDestination } from '../../http/address.ts';
import { readJson, validate } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { instantInput, time } from '../views.ts';
import { checkFilterColumns, normalFilter } from '../webhook-filter.ts';
import { z } from '../zod.ts';
import { SYNC_NOT_FOUND, findSync } from './syncs.ts';
import { checkTopics, destinationUrl, filterField, maxPerSecond, topicList, webhookAnswer, webhookParams, webhookView } from './webhook-shapes.ts';
import type { WebhookApiOptions } from './webhooks.ts';

const DEFAULT_EVENT_RETENTION_MS = 7 * 86_400_000;
const MAX_PREVIOUS_SECONDS = 604_800;
const DEFAULT_PREVIOUS_SECONDS = 86_400;

const changeWebhookBody = z
  .object({
    enabled: z
      .boolean({ errorMap: () => ({ message: 'must be true or false' }) })
      .optional()
      .describe('false: nothing is sent until true again; true: resumes from where it stopped (nothing logged meanwhile is lost, within the retention)'),
    filter: filterField.optional().describe('Replaces the filter; null removes it. It applies to events read from then on'),
    max_per_second: maxPerSecond.optional(),
    url: destinationUrl.optional(),
    topics: topicList.optional().describe('Replaces the topics; events of a topic added are sent from where the webhook is now'),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, 'give at least one of enabled, filter, max_per_second, url, topics')
  .openapi('ChangeWebhook');

const rotateBody = z
  .object({
    previous_expires_in: z
      .number()
      .int('must be a whole number of seconds')
      .min(0, `must be from 0 to ${MAX_PREVIOUS_SECONDS} seconds`)
      .max(MAX_PREVIOUS_SECONDS, `must be from 0 to ${MAX_PREVIOUS_SECONDS} seconds`)
      .optional()
      .describe(`Seconds the old secret keeps signing beside the new one (default ${DEFAULT_PREVIOUS_SECONDS}, a day; 0: not at all)`),
  })
  .strict()
  .openapi('RotateWebhookSecret');

const rotatedAnswer = z
  .object({
    secret: z.string().describe('The new secret (`whsec_…`), shown in this answer only'),
    previous_expires_at: time.nullable().describe('Until when deliveries also carry the old signature; null when `previous_expires_in` was 0'),
  })
  .strict()
  .openapi('RotatedWebhookSecret');

const recoverBody = z
  .object({
    since: instantInput.describe('Every event of its topics logged at or after this time is sent again'),
  })
  .strict()
  .openapi('RecoverWebhook');

const recoveredAnswer = z
  .object({
    id: z.string(),
    since: time,
    from_seq: z.string().describe('The event-log position delivery starts again from'),
    state: z.literal('enabled').describe('A recovered webhook is enabled'),
  })
  .strict();

const hours = (ms: number) => {
  const n = Math.round((ms / 3_600_000) * 100) / 100;
  return `${n} hour${n === 1 ? '' : 's'}`;
};

const WEBHOOK_NOT_FOUND = `${SYNC_NOT_FOUND}; or no such webhook of it`;
const UNCONFIGURED = 'Webhooks are not configured on this server';

/** What a webhook's owner changes after creating it: PATCH, secret rotation, recovery. */
export function webhookControlRoutes(router: Router, api: ApiOptions & WebhookApiOptions, doc: ApiDocument): void {
  const box = () => {
    if (!api.box) throw new TributaryError('unavailable', 'webhooks are not configured on this server');
    return api.box;
  };
  const retentionMs = api.eventRetentionMs ?? DEFAULT_EVENT_RETENTION_MS;

  const findWebhook = async (ctx: Context) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const destination = await new WebhookStore(api.pool, box()).get(sync.id, ctx.params.wid!);
    if (!destination) throw notFound(`webhook ${ctx.params.wid}`);
    return { sync, destination, controls: new DestinationControls(api.pool, box()) };
  };

  doc.route({
    method: 'patch',
    path: '/api/syncs/:id/webhooks/:wid',
    operationId: 'changeWebhook',
    tag: 'webhooks',
    summary: 'Enable, disable or change a webhook',
    description:
      'Fields left out stay as they are. A filter, rate or secret change applies to the running delivery at once; a new URL or topics restart it from where it is (a few events may be sent twice, with the same `webhook-id`).',
    access: 'token',
    params: webhookParams,
    body: { schema: changeWebhookBody },
    answers: { 200: { description: 'The webhook as it is now', schema: webhookAnswer } },
    errors: {
      400: 'An unknown field, `enabled` not a boolean, a topic not of this sync, or a filter naming an unknown kind or column',
      404: WEBHOOK_NOT_FOUND,
      422: "The URL's host has no public address (or could not be resolved)",
      503: `${UNCONFIGURED}; or the sync database could not be read to check the filter's columns`,
    },
  });
  router.patch('/api/syncs/:id/webhooks/:wid', async (ctx) => {
    const { sync, destination, controls } = await findWebhook(ctx);
    const input = validate(
      changeWebhookBody.superRefine((body, refine) => checkTopics(sync, body.topics, refine)),
      await readJson(ctx, api.bodyLimit),
    );
    const topics = input.topics ? [...new Set(input.topics)] : undefined;
    const filter = input.filter === undefined ? undefined : input.filter && normalFilter(input.filter);
    // The filter's columns against the topics it will have, whichever of the two changed.
    if (topics || filter) await checkFilterColumns(api, sync, topics ?? destination.topics, filter === undefined ? destination.filter : filter);
    if (input.url && !api.webhookAllowPrivate) await assertPublicDestination(new URL(input.url), api.webhookLookup);
    const changed = await controls.update(sync.id, destination.id, {
      ...(input.url ? { url: input.url } : {}),
      ...(topics ? { topics } : {}),
      ...(filter !== undefined ? { filter } : {}),
      ...(input.max_per_second !== undefined ? { maxPerSecond: input.max_per_second } : {}),
      ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
    });
    if (!changed) throw notFound(`webhook ${destination.id}`);
    api.logger.info(
      { sync: sync.id, webhook: destination.id, fields: Object.keys(input), state: changed.disabledAt ? 'disabled' : 'enabled' },
      'webhook changed',
    );
    ctx.body = webhookView(changed);
  });

  doc.route({
    method: 'post',
    path: '/api/syncs/:id/webhooks/:wid/rotate-secret',
    operationId: 'rotateWebhookSecret',
    tag: 'webhooks',
    summary: "Rotate a webhook's signing secret",
    description:
      'A new secret, answered here only. Until `previous_expires_at`, each delivery carries both signatures, space-separated in `webhook-signature` (new first), so a receiver checking either secret accepts it. Only the latest replaced secret is kept.',
    access: 'token',
    params: webhookParams,
    body: { schema: rotateBody, required: false, description: 'Optional: without a body the old secret keeps signing for a day' },
    answers: { 200: { description: 'The new secret', schema: rotatedAnswer } },
    errors: { 404: WEBHOOK_NOT_FOUND, 503: UNCONFIGURED },
  });
  router.post('/api/syncs/:id/webhooks/:wid/rotate-secret', async (ctx) => {
    const { sync, destination, controls } = await findWebhook(ctx);
    const body = await readJson(ctx, api.bodyLimit);
    const input = body === undefined ? {} : validate(rotateBody, body);
    const seconds = input.previous_expires_in ?? DEFAULT_PREVIOUS_SECONDS;
    const rotated = await controls.rotateSecret(sync.id, destination.id, seconds * 1000);
    if (!rotated) throw notFound(`webhook ${destination.id}`);
    api.logger.info({ sync: sync.id, webhook: destination.id, previous_expires_at: rotated.previousUntil }, 'webhook secret rotated');
    // The only answer that carries the new secret.
    ctx.body = { secret: rotated.secret.reveal(), previous_expires_at: rotated.previousUntil?.toISOString() ?? null } satisfies z.infer<typeof rotatedAnswer>;
  });

  doc.route({
    method: 'post',
    path: '/api/syncs/:id/webhooks/:wid/recover',
    operationId: 'recoverWebhook',
    tag: 'webhooks',
    summary: 'Send again every event since a time',
    description:
      "Every event of its topics (that passes its filter) logged at or after `since` is sent again, in order per record, with its own `webhook-id`; then delivery goes on. A disabled webhook is enabled. `since` must be within the event log's retention.",
    access: 'token',
    params: webhookParams,
    body: { schema: recoverBody },
    answers: { 202: { description: 'Delivery starts again from `from_seq`', schema: recoveredAnswer } },
    errors: {
      404: WEBHOOK_NOT_FOUND,
      422: "`since` is in the future, or older than the event log's retention",
      503: UNCONFIGURED,
    },
  });
  router.post('/api/syncs/:id/webhooks/:wid/recover', async (ctx) => {
    const { sync, destination, controls } = await findWebhook(ctx);
    const { since: text } = validate(recoverBody, await readJson(ctx, api.bodyLimit));
    const since = new Date(text);
    const now = Date.now();
    if (since.getTime() > now) throw new TributaryError('unprocessable', `since: ${since.toISOString()} is in the future`);
    const oldest = new Date(now - retentionMs);
    if (since < oldest) {
      throw new TributaryError(
        'unprocessable',
        `since: ${since.toISOString()} is older than the event log keeps events (${hours(retentionMs)}); the earliest is ${oldest.toISOString()}`,
      );
    }
    const recovered = await controls.recover(sync.id, destination.id, since);
    if (!recovered) throw notFound(`webhook ${destination.id}`);
    api.logger.info({ sync: sync.id, webhook: destination.id, since, from_seq: recovered.fromSeq }, 'webhook recovery asked for');
    ctx.status = 202;
    ctx.body = { id: destination.id, since: since.toISOString(), from_seq: recovered.fromSeq, state: 'enabled' } satisfies z.infer<typeof recoveredAnswer>;
  });
}
