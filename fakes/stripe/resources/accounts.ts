/**
 * Connect: a platform's connected accounts (`/v1/accounts`). Each is an account of its own
 * (AccountState, with `platform` set) that the platform reaches with `Stripe-Account` on any
 * request (server.ts). Stripe has no `account.created` or `account.deleted` event; an update
 * emits `account.updated` on the platform's feed.
 */
import { AccountState } from '../account.ts';
import type { Ctx } from '../context.ts';
import { invalidRequest } from '../errors.ts';
import { accountId } from '../ids.ts';
import { page } from '../lists.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { isHash, mergeMetadata, str } from './common.ts';
import { ACCOUNTS } from './names.ts';

const PLATFORM_ONLY = 'Only a platform can manage connected accounts; this request was made on behalf of a connected account.';

function platformOf(ctx: Ctx): AccountState {
  if (ctx.account.platform) throw invalidRequest(PLATFORM_ONLY);
  return ctx.account;
}

function create({ ctx, params }: Call): StripeObject {
  const platform = platformOf(ctx);
  const controller = isHash(params.controller) ? params.controller : undefined;
  const type = str(params.type) ?? (controller ? 'none' : undefined);
  if (!type) throw invalidRequest('You must specify either `type` or `controller` when creating an account.', { param: 'type' });
  const id = accountId();
  const connected = new AccountState(id, platform.livemode, platform.apiVersion);
  connected.platform = platform;
  if (platform.deliveries) connected.deliveries = platform.deliveries;
  if (platform.late) connected.late = platform.late;
  const custom = type === 'custom';
  const profile: StripeObject = {
    id,
    object: 'account',
    business_profile: { name: null, url: null, support_email: null },
    business_type: str(params.business_type) ?? null,
    capabilities: isHash(params.capabilities) ? Object.fromEntries(Object.keys(params.capabilities).map((name) => [name, 'inactive'])) : {},
    charges_enabled: false,
    controller: { type: type === 'standard' ? 'account' : 'application', is_controller: true },
    country: str(params.country) ?? 'US',
    created: ctx.now,
    default_currency: 'usd',
    details_submitted: !custom && type !== 'express',
    email: str(params.email) ?? null,
    metadata: mergeMetadata({}, params.metadata),
    payouts_enabled: false,
    type,
  };
  connected.profile = profile;
  platform.connected.set(id, connected);
  // Listed by the platform; no event (Stripe sends none for a new account).
  ctx.col(ACCOUNTS.name).insert(profile);
  return profile;
}

function list({ ctx, params }: Call): unknown {
  platformOf(ctx);
  const col = ctx.col(ACCOUNTS.name);
  return page(col.ordered(), { params, url: '/v1/accounts', noun: 'account', cursor: (id) => col.entry(id) });
}

function retrieve({ ctx, path }: Call): StripeObject {
  platformOf(ctx);
  return ctx.find(ACCOUNTS, path.account as string, 'account');
}

/** Metadata, email and business profile change; `account.updated` goes on the platform's feed. */
function update({ ctx, params, path }: Call): StripeObject {
  const platform = platformOf(ctx);
  const current = ctx.find(ACCOUNTS, path.account as string, 'account');
  const next: StripeObject = {
    ...current,
    ...(params.email !== undefined ? { email: str(params.email) ?? null } : {}),
    ...(params.business_type !== undefined ? { business_type: str(params.business_type) ?? null } : {}),
    ...(isHash(params.business_profile) ? { business_profile: { ...(current.business_profile as object), ...params.business_profile } } : {}),
    metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata),
  };
  const saved = ctx.save(ACCOUNTS, next);
  platform.connected.get(saved.id)!.profile = saved;
  return saved;
}

function remove({ ctx, path }: Call): unknown {
  const platform = platformOf(ctx);
  const current = ctx.find(ACCOUNTS, path.account as string, 'account');
  platform.connected.delete(current.id);
  return ctx.destroy(ACCOUNTS, current, null);
}

export const accountRoutes: Route[] = [
  { method: 'POST', template: '/v1/accounts', group: ACCOUNTS.group, handler: create },
  { method: 'GET', template: '/v1/accounts', group: ACCOUNTS.group, handler: list },
  { method: 'GET', template: '/v1/accounts/{account}', group: ACCOUNTS.group, handler: retrieve },
  { method: 'POST', template: '/v1/accounts/{account}', group: ACCOUNTS.group, handler: update },
  { method: 'DELETE', template: '/v1/accounts/{account}', group: ACCOUNTS.group, handler: remove },
];
