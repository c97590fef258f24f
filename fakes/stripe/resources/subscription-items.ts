/**
 * Subscription items: what a subscription bills for. Items are changed through the
 * subscription (items[] on update) or their own endpoints; either way the change is a
 * subscription change, announced by customer.subscription.updated.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import type { Value } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import { compareEntries, type Entry, type StripeObject } from '../store.ts';
import { addInterval } from './billing.ts';
import { embeddedList, int, isHash, type Json, mergeMetadata, str } from './common.ts';
import { crudRoutes, type ResourceDef } from './crud.ts';
import { PRICES, SUBSCRIPTION_ITEMS, SUBSCRIPTIONS } from './names.ts';
import { createPrice } from './prices.ts';

/** The recurring price an `items[i]` entry names (price, plan or inline price_data). */
export function itemPrice(ctx: Ctx, item: Record<string, Value>, param: string): StripeObject {
  if (isHash(item.price_data)) {
    const data = item.price_data;
    return createPrice(ctx, { ...data, active: false }, `${param}[price_data]`);
  }
  const id = str(item.price) ?? str(item.plan);
  if (!id) throw missingParam(`${param}[price]`);
  const price = ctx.get(PRICES, id);
  if (!price) throw noSuch('price', id, `${param}[price]`);
  if (price.type !== 'recurring') {
    throw invalidRequest('The price specified is set to `type=one_time` but this field only accepts prices with `type=recurring`.', {
      param: `${param}[price]`,
    });
  }
  if (price.active !== true) throw invalidRequest(`The price specified is inactive. This field only accepts active prices.`, { param: `${param}[price]` });
  return price;
}

export function buildItem(
  ctx: Ctx,
  subId: string,
  price: StripeObject,
  quantity: number,
  metadata: Record<string, string>,
  period: { start: number; end: number },
): StripeObject {
  return {
    id: ctx.newId(SUBSCRIPTION_ITEMS.prefix),
    object: 'subscription_item',
    billing_thresholds: null,
    created: ctx.now,
    current_period_end: period.end,
    current_period_start: period.start,
    discounts: [],
    metadata,
    price,
    quantity,
    subscription: subId,
    tax_rates: [],
  };
}

/** The subscription's live items, oldest first, as its `items` list embeds them. */
export function itemsOf(ctx: Ctx, subId: string): StripeObject[] {
  const found: Entry[] = [];
  for (const e of ctx.col(SUBSCRIPTION_ITEMS.name).liveEntries()) if (e.obj.subscription === subId) found.push(e);
  return found.sort(compareEntries).map((e) => e.obj);
}

export function withItems(ctx: Ctx, sub: StripeObject, items = itemsOf(ctx, sub.id)): StripeObject {
  return { ...sub, items: embeddedList(items, `/v1/subscription_items?subscription=${sub.id}`) };
}

export function checkIntervals(prices: StripeObject[], param: string): void {
  const first = prices[0]?.recurring as { interval: string; interval_count: number } | undefined;
  for (const p of prices) {
    const r = p.recurring as { interval: string; interval_count: number };
    if (p.currency !== prices[0]?.currency)
      throw invalidRequest('Currency and interval fields must match across all plans on this subscription. Found mismatch in currency field.', { param });
    if (r.interval !== first?.interval || r.interval_count !== first.interval_count) {
      throw invalidRequest('Currency and interval fields must match across all plans on this subscription. Found mismatch in interval field.', { param });
    }
  }
}

/** Applies `items[]` changes (add, change, `deleted`), checking the result before storing any of it. */
export function applyItemChanges(ctx: Ctx, sub: StripeObject, changes: Value[]): void {
  const items = ctx.col(SUBSCRIPTION_ITEMS.name);
  const current = itemsOf(ctx, sub.id);
  const period = (current[0] ?? {}) as Json;
  const removed = new Set<string>();
  const replaced = new Map<string, StripeObject>();
  const added: StripeObject[] = [];
  changes.forEach((raw, i) => {
    if (!isHash(raw)) return;
    const param = `items[${i}]`;
    const id = str(raw.id);
    if (id) {
      const item = replaced.get(id) ?? items.get(id);
      if (!item || item.subscription !== sub.id) throw noSuch('subscription item', id, `${param}[id]`);
      if (raw.deleted === true) {
        removed.add(id);
        return;
      }
      const next: StripeObject = { ...item, metadata: mergeMetadata(item.metadata as Record<string, string>, raw.metadata) };
      if (raw.price !== undefined || raw.price_data !== undefined) next.price = itemPrice(ctx, raw, param);
      if (int(raw.quantity) !== undefined) next.quantity = raw.quantity;
      replaced.set(id, next);
      return;
    }
    const price = itemPrice(ctx, raw, param);
    const recurring = price.recurring as { interval: string; interval_count: number };
    const start = (period.current_period_start as number | undefined) ?? ctx.now;
    const end = (period.current_period_end as number | undefined) ?? addInterval(start, recurring.interval, recurring.interval_count);
    added.push(buildItem(ctx, sub.id, price, int(raw.quantity) ?? 1, mergeMetadata({}, raw.metadata), { start, end }));
  });
  const result = [...current.filter((it) => !removed.has(it.id)).map((it) => replaced.get(it.id) ?? it), ...added];
  if (result.length === 0) {
    throw invalidRequest(
      'A subscription must have at least one active plan. To cancel a subscription, please use the cancel API endpoint on /v1/subscriptions.',
      { param: 'items' },
    );
  }
  checkIntervals(
    result.map((it) => it.price as StripeObject),
    'items',
  );
  for (const id of removed) items.remove(id);
  for (const [id, next] of replaced) if (!removed.has(id)) items.replace(next);
  for (const item of added) items.insert(item);
}

/** Item changes are subscription changes: one customer.subscription.updated each. */
function saveWithItems(ctx: Ctx, subId: string): void {
  ctx.save(SUBSCRIPTIONS, withItems(ctx, ctx.find(SUBSCRIPTIONS, subId)));
}

function createItem({ ctx, params }: Call): StripeObject {
  const sub = ctx.find(SUBSCRIPTIONS, params.subscription as string, 'subscription');
  if (sub.status === 'canceled') throw invalidRequest('A canceled subscription can only update its cancellation_details and metadata.');
  applyItemChanges(ctx, sub, [{ ...params, subscription: null } as Value]);
  saveWithItems(ctx, sub.id);
  const items = itemsOf(ctx, sub.id);
  return items[items.length - 1] as StripeObject;
}

const subscriptionItems: ResourceDef = {
  ...SUBSCRIPTION_ITEMS,
  path: '/v1/subscription_items',
  idParam: 'item',
  create: createItem,
  update: ({ ctx, params }, current) => {
    const sub = ctx.find(SUBSCRIPTIONS, current.subscription as string);
    applyItemChanges(ctx, sub, [{ ...params, id: current.id } as Value]);
    saveWithItems(ctx, sub.id);
    return ctx.find(SUBSCRIPTION_ITEMS, current.id);
  },
  remove: ({ ctx }, current) => {
    const sub = ctx.find(SUBSCRIPTIONS, current.subscription as string);
    applyItemChanges(ctx, sub, [{ id: current.id, deleted: true }]);
    saveWithItems(ctx, sub.id);
    return { id: current.id, object: 'subscription_item', deleted: true };
  },
  // Listing needs a subscription that exists (`subscription` is a required parameter).
  filter: (call) => {
    const id = call.params.subscription as string;
    if (!call.ctx.get(SUBSCRIPTIONS, id)) throw noSuch('subscription', id, 'subscription');
    return (o) => o.subscription === id;
  },
};

export const subscriptionItemRoutes: Route[] = crudRoutes(subscriptionItems);
