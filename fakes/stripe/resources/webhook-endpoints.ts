/**
 * Webhook endpoints (`/v1/webhook_endpoints`): where an account's events are POSTed, signed
 * with the endpoint's secret, which only the creation answer shows (deliveries.ts sends them).
 * `connect: true` on a platform receives its connected accounts' events instead of its own.
 * Knowingly not Stripe: any http(s) URL is taken, local ones too (Stripe wants a public one),
 * so tests can receive deliveries.
 */
import type { Ctx } from '../context.ts';
import { ENDPOINTS } from '../deliveries.ts';
import { invalidRequest } from '../errors.ts';
import { webhookSecret } from '../ids.ts';
import { page } from '../lists.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { bool, mergeMetadata, str } from './common.ts';
import { WEBHOOK_ENDPOINTS } from './names.ts';

/** Stripe's documented limit of endpoints per account. */
const MAX_ENDPOINTS = 16;

function url(value: unknown): string {
  const text = str(value as string | undefined);
  let parsed: URL | undefined;
  try {
    parsed = text ? new URL(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:'))
    throw invalidRequest('Invalid URL: URL must be a valid http(s) URL.', { param: 'url' });
  return text as string;
}

function enabledEvents(value: unknown): string[] {
  const events = Array.isArray(value) ? value.map(String) : [];
  // Each type was checked against the spec's list (`*` or a known type) before the handler.
  if (events.length === 0) throw invalidRequest('You must specify at least one event in enabled_events.', { param: 'enabled_events' });
  return events;
}

function live(ctx: Ctx): StripeObject[] {
  return ctx.account.hasCollection(ENDPOINTS)
    ? ctx
        .col(ENDPOINTS)
        .ordered()
        .filter((e) => !e.deleted)
        .map((e) => e.obj)
    : [];
}

function create({ ctx, params }: Call): StripeObject {
  if (live(ctx).length >= MAX_ENDPOINTS) throw invalidRequest(`You have reached the maximum of ${MAX_ENDPOINTS} webhook endpoints on this account.`);
  const secret = webhookSecret();
  const endpoint: StripeObject = {
    id: ctx.newId(WEBHOOK_ENDPOINTS.prefix),
    object: 'webhook_endpoint',
    api_version: str(params.api_version) ?? null,
    application: null,
    created: ctx.now,
    description: str(params.description) ?? null,
    enabled_events: enabledEvents(params.enabled_events),
    livemode: ctx.livemode,
    metadata: mergeMetadata({}, params.metadata),
    status: 'enabled',
    url: url(params.url),
  };
  // Whether it takes connected accounts' events is not part of the object Stripe shows.
  ctx.account.hidden.set(endpoint.id, { secrets: [secret], connect: bool(params.connect) ?? false });
  ctx.insert(WEBHOOK_ENDPOINTS, endpoint, null);
  // The secret is shown once, in this answer.
  return { ...endpoint, secret };
}

function list({ ctx, params }: Call): unknown {
  const col = ctx.col(ENDPOINTS);
  return page(col.ordered(), { params, url: '/v1/webhook_endpoints', noun: 'webhook_endpoint', cursor: (id) => col.entry(id) });
}

function retrieve({ ctx, path }: Call): StripeObject {
  return ctx.find(WEBHOOK_ENDPOINTS, path.webhook_endpoint as string, 'webhook_endpoint');
}

function update({ ctx, params, path }: Call): StripeObject {
  const current = ctx.find(WEBHOOK_ENDPOINTS, path.webhook_endpoint as string, 'webhook_endpoint');
  const disabled = bool(params.disabled);
  const next: StripeObject = {
    ...current,
    ...(params.url !== undefined ? { url: url(params.url) } : {}),
    ...(params.enabled_events !== undefined ? { enabled_events: enabledEvents(params.enabled_events) } : {}),
    ...(params.description !== undefined ? { description: str(params.description) ?? null } : {}),
    ...(disabled !== undefined ? { status: disabled ? 'disabled' : 'enabled' } : {}),
    metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata),
  };
  return ctx.save(WEBHOOK_ENDPOINTS, next, null);
}

function remove({ ctx, path }: Call): unknown {
  const current = ctx.find(WEBHOOK_ENDPOINTS, path.webhook_endpoint as string, 'webhook_endpoint');
  ctx.account.hidden.delete(current.id);
  return ctx.destroy(WEBHOOK_ENDPOINTS, current, null);
}

const template = '/v1/webhook_endpoints/{webhook_endpoint}';
export const webhookEndpointRoutes: Route[] = [
  { method: 'POST', template: '/v1/webhook_endpoints', group: WEBHOOK_ENDPOINTS.group, handler: create },
  { method: 'GET', template: '/v1/webhook_endpoints', group: WEBHOOK_ENDPOINTS.group, handler: list },
  { method: 'GET', template, group: WEBHOOK_ENDPOINTS.group, handler: retrieve },
  { method: 'POST', template, group: WEBHOOK_ENDPOINTS.group, handler: update },
  { method: 'DELETE', template, group: WEBHOOK_ENDPOINTS.group, handler: remove },
];
