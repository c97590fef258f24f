/**
 * Prices, and plans as Stripe still serves them: a plan is the view of a recurring price with
 * the same id, so both APIs see one set of objects and both kinds of events are emitted.
 * Prices cannot be deleted through the API; deleting a plan deletes its price.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import { previousAttributes } from '../events.ts';
import type { Params, Value } from '../params.ts';
import type { Call } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { ids, int, isHash, mergeMetadata, str } from './common.ts';
import { both, crudRoutes, fieldFilter, listPage, type ResourceDef } from './crud.ts';
import { PLANS, PRICES, PRODUCTS } from './names.ts';
import { newProduct } from './products.ts';

function decimal(n: number | null): string | null {
  return n === null ? null : String(n);
}

function tiersOf(v: Value | undefined): Array<Record<string, unknown>> | undefined {
  if (!Array.isArray(v)) return undefined;
  return v.map((t) => {
    const h = isHash(t) ? t : {};
    const unit = int(h.unit_amount) ?? null;
    const flat = int(h.flat_amount) ?? null;
    return {
      flat_amount: flat,
      flat_amount_decimal: typeof h.flat_amount_decimal === 'string' ? h.flat_amount_decimal : decimal(flat),
      unit_amount: unit,
      unit_amount_decimal: typeof h.unit_amount_decimal === 'string' ? h.unit_amount_decimal : decimal(unit),
      up_to: h.up_to === 'inf' ? null : (int(h.up_to) ?? null),
    };
  });
}

function productFor(ctx: Ctx, p: Params, param: string): string {
  const product = p.product;
  if (typeof product === 'string' && product !== '') {
    if (!ctx.get(PRODUCTS, product)) throw noSuch('product', product, param === 'price' ? 'product' : `${param}[product]`);
    return product;
  }
  const data = p.product_data;
  if (isHash(data)) {
    const id = typeof data.id === 'string' ? data.id : ctx.newId(PRODUCTS.prefix);
    const prod = newProduct(ctx, id, String(data.name));
    for (const k of ['statement_descriptor', 'tax_code', 'unit_label'] as const) if (typeof data[k] === 'string') prod[k] = data[k];
    if (typeof data.active === 'boolean') prod.active = data.active;
    prod.metadata = mergeMetadata({}, data.metadata);
    return ctx.insert(PRODUCTS, prod).id;
  }
  throw invalidRequest('You must specify either `product` or `product_data` when creating a price.', { param: 'product' });
}

export interface PriceFields {
  id: string;
  currency: string;
  product: string;
  unitAmount: number | null;
  unitDecimal?: string | null;
  recurring: { interval: string; interval_count: number; meter: string | null; usage_type: string } | null;
  billingScheme?: string;
  tiersMode?: string | null;
  customUnitAmount?: Record<string, unknown> | null;
  active?: boolean;
  lookupKey?: string | null;
  metadata?: Record<string, string>;
  nickname?: string | null;
  taxBehavior?: string;
  transformQuantity?: Record<string, unknown> | null;
}

/** The price object itself, stored by nobody yet. */
export function priceTemplate(ctx: Ctx, f: PriceFields): StripeObject {
  return {
    id: f.id,
    object: 'price',
    active: f.active ?? true,
    billing_scheme: f.billingScheme ?? 'per_unit',
    created: ctx.now,
    currency: f.currency,
    custom_unit_amount: f.customUnitAmount ?? null,
    livemode: ctx.livemode,
    lookup_key: f.lookupKey ?? null,
    metadata: f.metadata ?? {},
    nickname: f.nickname ?? null,
    product: f.product,
    recurring: f.recurring,
    tax_behavior: f.taxBehavior ?? 'unspecified',
    tiers_mode: f.tiersMode ?? null,
    transform_quantity: f.transformQuantity ?? null,
    type: f.recurring ? 'recurring' : 'one_time',
    unit_amount: f.unitAmount,
    unit_amount_decimal: f.unitDecimal === undefined ? decimal(f.unitAmount) : f.unitDecimal,
  };
}

/** A price from create params (POST /v1/prices, `default_price_data`, `price_data`). */
export function createPrice(ctx: Ctx, p: Params, param = 'price', id?: string): StripeObject {
  const currency = String(p.currency ?? '').toLowerCase();
  if (!currency) throw missingParam(`${param === 'price' ? '' : `${param}[`}currency${param === 'price' ? '' : ']'}`);
  const billingScheme = (p.billing_scheme as string | undefined) ?? 'per_unit';
  const tiers = tiersOf(p.tiers);
  let unitAmount = int(p.unit_amount) ?? null;
  let unitDecimal = typeof p.unit_amount_decimal === 'string' ? p.unit_amount_decimal : decimal(unitAmount);
  if (unitAmount === null && unitDecimal !== null && /^\d+$/.test(unitDecimal)) unitAmount = Number(unitDecimal);
  const custom = isHash(p.custom_unit_amount)
    ? { maximum: p.custom_unit_amount.maximum ?? null, minimum: p.custom_unit_amount.minimum ?? null, preset: p.custom_unit_amount.preset ?? null }
    : null;
  if (billingScheme === 'tiered') {
    if (!tiers || tiers.length === 0) throw missingParam('tiers');
    if (typeof p.tiers_mode !== 'string') throw missingParam('tiers_mode');
    unitAmount = null;
    unitDecimal = null;
  } else if (unitAmount === null && unitDecimal === null && !custom) {
    throw invalidRequest('Missing required param: unit_amount. You must provide one of unit_amount, unit_amount_decimal, or custom_unit_amount.', {
      code: 'parameter_missing',
      param: 'unit_amount',
    });
  }
  const recurring = isHash(p.recurring)
    ? {
        interval: String(p.recurring.interval),
        interval_count: int(p.recurring.interval_count) ?? 1,
        meter: typeof p.recurring.meter === 'string' ? p.recurring.meter : null,
        usage_type: (p.recurring.usage_type as string | undefined) ?? 'licensed',
      }
    : null;
  if (recurring?.usage_type === 'metered' && !recurring.meter) {
    throw invalidRequest('Meter is required for metered prices.', { param: 'recurring[meter]' });
  }
  const lookupKey = str(p.lookup_key) ?? null;
  if (lookupKey) claimLookupKey(ctx, lookupKey, p.transfer_lookup_key === true);
  const price = priceTemplate(ctx, {
    id: id ?? ctx.newId(PRICES.prefix),
    currency,
    product: productFor(ctx, p, param),
    unitAmount,
    unitDecimal,
    recurring,
    billingScheme,
    tiersMode: billingScheme === 'tiered' ? (p.tiers_mode as string) : null,
    customUnitAmount: custom,
    active: typeof p.active === 'boolean' ? p.active : true,
    lookupKey,
    metadata: mergeMetadata({}, p.metadata),
    nickname: str(p.nickname) ?? null,
    taxBehavior: (p.tax_behavior as string | undefined) ?? 'unspecified',
    transformQuantity: isHash(p.transform_quantity) ? { divide_by: p.transform_quantity.divide_by, round: p.transform_quantity.round } : null,
  });
  if (tiers) ctx.account.hidden.set(price.id, { ...(ctx.account.hidden.get(price.id) ?? {}), tiers });
  ctx.insert(PRICES, price);
  if (recurring) ctx.emit('plan.created', planOf(ctx, price));
  return price;
}

/** Lookup keys are unique per account; `transfer_lookup_key` takes one from another price. */
function claimLookupKey(ctx: Ctx, key: string, transfer: boolean): void {
  for (const other of ctx.col(PRICES.name).values()) {
    if (other.lookup_key !== key) continue;
    if (!transfer) {
      throw invalidRequest(`A price (\`${other.id}\`) already uses that lookup key.`, { param: 'lookup_key' });
    }
    savePrice(ctx, { ...other, lookup_key: null });
  }
}

/** Stores a price change and its events (plan.updated too for recurring prices). */
export function savePrice(ctx: Ctx, next: StripeObject): StripeObject {
  const before = ctx.find(PRICES, next.id);
  const saved = ctx.save(PRICES, next);
  if (saved !== before && next.recurring) {
    const previous = previousAttributes(planOf(ctx, before), planOf(ctx, saved));
    if (previous) ctx.emit('plan.updated', planOf(ctx, saved), previous);
  }
  return saved;
}

/** The plan view of a recurring price. */
export function planOf(ctx: Ctx, price: StripeObject): StripeObject {
  const recurring = price.recurring as { interval: string; interval_count: number; meter: string | null; usage_type: string };
  const hidden = ctx.account.hidden.get(price.id) ?? {};
  return {
    id: price.id,
    object: 'plan',
    active: price.active,
    amount: price.unit_amount,
    amount_decimal: price.unit_amount_decimal,
    billing_scheme: price.billing_scheme,
    created: price.created,
    currency: price.currency,
    interval: recurring.interval,
    interval_count: recurring.interval_count,
    livemode: price.livemode,
    metadata: price.metadata,
    meter: recurring.meter,
    nickname: price.nickname,
    product: price.product,
    tiers_mode: price.tiers_mode,
    transform_usage: price.transform_quantity,
    trial_period_days: (hidden.trial_period_days as number | undefined) ?? null,
    usage_type: recurring.usage_type,
  };
}

function updatePrice({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  if (typeof params.active === 'boolean') next.active = params.active;
  if (params.nickname !== undefined) next.nickname = params.nickname === '' ? null : params.nickname;
  if (params.lookup_key !== undefined) {
    const key = params.lookup_key === '' ? null : String(params.lookup_key);
    if (key && key !== current.lookup_key) claimLookupKey(ctx, key, params.transfer_lookup_key === true);
    next.lookup_key = key;
  }
  if (typeof params.tax_behavior === 'string') {
    if (current.tax_behavior !== 'unspecified' && params.tax_behavior !== current.tax_behavior) {
      throw invalidRequest('Tax behavior cannot be changed once it has been set to inclusive or exclusive.', { param: 'tax_behavior' });
    }
    next.tax_behavior = params.tax_behavior;
  }
  return savePrice(ctx, next);
}

export const prices: ResourceDef = {
  ...PRICES,
  path: '/v1/prices',
  idParam: 'price',
  create: ({ ctx, params }) => createPrice(ctx, params),
  update: updatePrice,
  filter: ({ params }) => {
    const keys = ids(params.lookup_keys);
    const rec = isHash(params.recurring) ? params.recurring : undefined;
    return both(
      fieldFilter(params, ['active', 'currency', 'product', 'type']),
      keys.length > 0 ? (o) => keys.includes(o.lookup_key as string) : undefined,
      rec
        ? (o) => {
            const r = o.recurring as Record<string, unknown> | null;
            return !!r && Object.entries(rec).every(([k, v]) => r[k] === v);
          }
        : undefined,
    );
  },
};

const isPlan = (o: StripeObject) => o.recurring !== null;

function findPlan(ctx: Ctx, id: string): StripeObject {
  const price = ctx.get(PRICES, id);
  if (!price || !isPlan(price)) throw noSuch('plan', id);
  return price;
}

function createPlan({ ctx, params }: Call): StripeObject {
  const id = str(params.id);
  if (id && ctx.col(PRICES.name).entry(id)) throw invalidRequest('Plan already exists.', { code: 'resource_already_exists', param: 'id' });
  const product = params.product;
  const priceParams: Params = {
    currency: params.currency as string,
    recurring: {
      interval: params.interval as string,
      interval_count: params.interval_count ?? 1,
      usage_type: params.usage_type ?? 'licensed',
      ...(params.meter ? { meter: params.meter } : {}),
    },
    ...(isHash(product) ? { product_data: product } : typeof product === 'string' ? { product } : {}),
  };
  for (const k of ['active', 'metadata', 'nickname', 'billing_scheme', 'tiers', 'tiers_mode'] as const) if (params[k] !== undefined) priceParams[k] = params[k];
  if (params.amount !== undefined) priceParams.unit_amount = params.amount;
  if (params.amount_decimal !== undefined) priceParams.unit_amount_decimal = params.amount_decimal;
  if (isHash(params.transform_usage)) priceParams.transform_quantity = params.transform_usage;
  const newId = id ?? ctx.newId(PRICES.prefix);
  if (typeof params.trial_period_days === 'number') ctx.account.hidden.set(newId, { trial_period_days: params.trial_period_days });
  return planOf(ctx, createPrice(ctx, priceParams, 'price', newId));
}

function updatePlan({ ctx, params }: Call, id: string): StripeObject {
  const price = findPlan(ctx, id);
  if (typeof params.trial_period_days === 'number' || params.trial_period_days === '') {
    const before = planOf(ctx, price);
    const hidden = { ...(ctx.account.hidden.get(id) ?? {}) };
    if (params.trial_period_days === '') delete hidden.trial_period_days;
    else hidden.trial_period_days = params.trial_period_days;
    ctx.account.hidden.set(id, hidden);
    const after = planOf(ctx, price);
    const previous = previousAttributes(before, after);
    if (previous) ctx.emit('plan.updated', after, previous);
  }
  const next: StripeObject = { ...price, metadata: mergeMetadata(price.metadata as Record<string, string>, params.metadata) };
  if (typeof params.active === 'boolean') next.active = params.active;
  if (params.nickname !== undefined) next.nickname = params.nickname === '' ? null : params.nickname;
  if (typeof params.product === 'string') {
    if (!ctx.get(PRODUCTS, params.product)) throw noSuch('product', params.product, 'product');
    next.product = params.product;
  }
  return planOf(ctx, savePrice(ctx, next));
}

export const priceRoutes = [
  ...crudRoutes(prices),
  {
    method: 'GET' as const,
    template: '/v1/plans',
    group: PLANS.group,
    handler: (call: Call) => {
      const page = listPage(call.ctx, PRICES, call.params, '/v1/plans', both(isPlan, fieldFilter(call.params, ['active', 'product'])));
      return { ...page, data: page.data.map((p) => planOf(call.ctx, p)) };
    },
  },
  { method: 'POST' as const, template: '/v1/plans', group: PLANS.group, handler: createPlan },
  {
    method: 'GET' as const,
    template: '/v1/plans/{plan}',
    group: PLANS.group,
    handler: ({ ctx, path }: Call) => planOf(ctx, findPlan(ctx, path.plan as string)),
  },
  { method: 'POST' as const, template: '/v1/plans/{plan}', group: PLANS.group, handler: (call: Call) => updatePlan(call, call.path.plan as string) },
  {
    method: 'DELETE' as const,
    template: '/v1/plans/{plan}',
    group: PLANS.group,
    handler: ({ ctx, path }: Call) => {
      const price = findPlan(ctx, path.plan as string);
      const plan = planOf(ctx, price);
      ctx.destroy(PRICES, price);
      ctx.emit('plan.deleted', plan);
      return { id: plan.id, object: 'plan', deleted: true };
    },
  },
];
