/**
 * Card payment methods: created from test tokens, attached to and detached from customers,
 * listed per customer. The magic ids of Stripe's test mode (`pm_card_visa`) stand for a fresh
 * copy of that test card wherever a payment method id is accepted.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import type { Params } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { fingerprintOf, type TestCard, testCard } from './cards.ts';
import { EMPTY_ADDRESS, isHash, type Json, mergeMetadata, str } from './common.ts';
import { both, crudRoutes, fieldFilter, listPage, type ResourceDef } from './crud.ts';
import { CUSTOMERS, PAYMENT_METHODS } from './names.ts';

const DISPLAY_BRAND: Record<string, string> = { amex: 'american_express', unionpay: 'union_pay' };

export function cardDetails(card: TestCard, expMonth: number, expYear: number): Json {
  return {
    brand: card.brand,
    checks: { address_line1_check: null, address_postal_code_check: null, cvc_check: 'pass' },
    country: card.country,
    display_brand: DISPLAY_BRAND[card.brand] ?? card.brand,
    exp_month: expMonth,
    exp_year: expYear,
    fingerprint: fingerprintOf(card),
    funding: card.funding,
    generated_from: null,
    last4: card.last4,
    networks: { available: [card.brand], preferred: null },
    regulated_status: 'unregulated',
    three_d_secure_usage: { supported: true },
    wallet: null,
  };
}

function billingDetails(v: Params[string] | undefined, current?: Json): Json {
  const base: Json = current ?? { address: { ...EMPTY_ADDRESS }, email: null, name: null, phone: null, tax_id: null };
  if (!isHash(v)) return base;
  const next: Json = { ...base };
  for (const k of ['email', 'name', 'phone', 'tax_id'] as const) if (v[k] !== undefined) next[k] = v[k] === '' ? null : v[k];
  if (v.address !== undefined) next.address = isHash(v.address) ? { ...EMPTY_ADDRESS, ...(base.address as Json), ...v.address } : { ...EMPTY_ADDRESS };
  return next;
}

export function newCardPaymentMethod(ctx: Ctx, id: string, card: TestCard, expYear: number): StripeObject {
  return {
    id,
    object: 'payment_method',
    allow_redisplay: 'unspecified',
    billing_details: billingDetails(undefined),
    card: cardDetails(card, 12, expYear),
    created: ctx.now,
    customer: null,
    customer_account: null,
    livemode: ctx.livemode,
    metadata: {},
    type: 'card',
  };
}

/** Test mode's magic ids make a new payment method; anything else must exist. */
export function resolvePaymentMethod(ctx: Ctx, id: string, param: string): StripeObject {
  const card = testCard(id);
  if (card && !ctx.livemode) {
    const year = new Date(ctx.clock.nowMs()).getUTCFullYear() + 3;
    return ctx.insert(PAYMENT_METHODS, newCardPaymentMethod(ctx, ctx.newId(PAYMENT_METHODS.prefix), card, year));
  }
  const pm = ctx.get(PAYMENT_METHODS, id);
  if (!pm) throw noSuch('PaymentMethod', id, param);
  return pm;
}

/** Attaches a payment method (or a magic test id) to a customer: payment_method.attached. */
export function attachPaymentMethod(ctx: Ctx, id: string, customerId: string, param = 'payment_method'): StripeObject {
  const customer = ctx.get(CUSTOMERS, customerId);
  if (!customer) throw noSuch('customer', customerId, 'customer');
  const pm = resolvePaymentMethod(ctx, id, param);
  if (pm.customer === customerId) return pm;
  if (pm.customer !== null)
    throw invalidRequest('The payment method you provided has already been attached to a customer.', { code: 'payment_method_unexpected_state', param });
  if (ctx.account.hidden.get(pm.id)?.detached) {
    throw invalidRequest(
      'This PaymentMethod was previously used without being attached to a Customer or was detached from a Customer, and may not be used again.',
      { code: 'payment_method_unexpected_state', param },
    );
  }
  return ctx.save(PAYMENT_METHODS, { ...pm, customer: customerId }, 'payment_method.attached');
}

function create({ ctx, params }: Call): StripeObject {
  if (params.type !== 'card') {
    throw invalidRequest(`The fake Stripe only creates card payment methods; got type ${String(params.type)}.`, { param: 'type' });
  }
  const card = isHash(params.card) ? params.card : {};
  if (card.number !== undefined) {
    throw invalidRequest(
      'Sending credit card numbers directly to the Stripe API is generally unsafe. We suggest you use test tokens that map to the test card you are using, see https://stripe.com/docs/testing.',
      { param: 'card[number]' },
    );
  }
  const token = str(card.token);
  if (!token) throw invalidRequest('Missing required param: card[token].', { code: 'parameter_missing', param: 'card[token]' });
  const test = testCard(token);
  if (!test) throw noSuch('token', token, 'card[token]');
  const pm = newCardPaymentMethod(ctx, ctx.newId(PAYMENT_METHODS.prefix), test, new Date(ctx.clock.nowMs()).getUTCFullYear() + 3);
  pm.billing_details = billingDetails(params.billing_details);
  pm.metadata = mergeMetadata({}, params.metadata);
  if (typeof params.allow_redisplay === 'string') pm.allow_redisplay = params.allow_redisplay;
  // There is no payment_method.created event in Stripe.
  return ctx.insert(PAYMENT_METHODS, pm);
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  if (params.billing_details !== undefined) next.billing_details = billingDetails(params.billing_details, current.billing_details as Json);
  if (typeof params.allow_redisplay === 'string') next.allow_redisplay = params.allow_redisplay;
  if (isHash(params.card)) {
    if (current.customer === null)
      throw invalidRequest('You must save this PaymentMethod to a customer before you can update it.', { code: 'payment_method_unexpected_state' });
    const c = { ...(current.card as Json) };
    if (typeof params.card.exp_month === 'number') c.exp_month = params.card.exp_month;
    if (typeof params.card.exp_year === 'number') c.exp_year = params.card.exp_year;
    next.card = c;
  }
  return ctx.save(PAYMENT_METHODS, next, 'payment_method.updated');
}

function detach({ ctx, path }: Call): StripeObject {
  const pm = ctx.find(PAYMENT_METHODS, path.payment_method as string);
  if (pm.customer === null)
    throw invalidRequest('The payment method you provided is not attached to a customer so detachment is impossible.', {
      code: 'payment_method_unexpected_state',
    });
  ctx.account.hidden.set(pm.id, { ...(ctx.account.hidden.get(pm.id) ?? {}), detached: true });
  const customer = ctx.get(CUSTOMERS, pm.customer as string);
  const detached = ctx.save(PAYMENT_METHODS, { ...pm, customer: null }, 'payment_method.detached');
  const settings = customer?.invoice_settings as Json | undefined;
  if (customer && settings?.default_payment_method === pm.id) {
    ctx.save(CUSTOMERS, { ...customer, invoice_settings: { ...settings, default_payment_method: null } });
  }
  return detached;
}

const paymentMethods: ResourceDef = {
  ...PAYMENT_METHODS,
  path: '/v1/payment_methods',
  idParam: 'payment_method',
  create,
  update,
  filter: ({ params }) => fieldFilter(params, ['customer', 'type']),
};

function customerPaymentMethods(call: Call): unknown {
  const { ctx, params, path } = call;
  const customer = path.customer as string;
  if (!ctx.get(CUSTOMERS, customer)) throw noSuch('customer', customer, 'customer');
  const filter = both((o) => o.customer === customer, fieldFilter(params, ['type', 'allow_redisplay']));
  return listPage(ctx, PAYMENT_METHODS, params, `/v1/customers/${customer}/payment_methods`, filter);
}

export const paymentMethodRoutes: Route[] = [
  ...crudRoutes(paymentMethods),
  {
    method: 'POST',
    template: '/v1/payment_methods/{payment_method}/attach',
    group: PAYMENT_METHODS.group,
    handler: ({ ctx, params, path }) => {
      if (typeof params.customer !== 'string') throw missingParam('customer');
      return attachPaymentMethod(ctx, path.payment_method as string, params.customer, 'payment_method');
    },
  },
  { method: 'POST', template: '/v1/payment_methods/{payment_method}/detach', group: PAYMENT_METHODS.group, handler: detach },
  { method: 'GET', template: '/v1/customers/{customer}/payment_methods', group: PAYMENT_METHODS.group, handler: customerPaymentMethods },
  {
    method: 'GET',
    template: '/v1/customers/{customer}/payment_methods/{payment_method}',
    group: PAYMENT_METHODS.group,
    handler: ({ ctx, path }) => {
      const pm = ctx.get(PAYMENT_METHODS, path.payment_method as string);
      if (!pm || pm.customer !== path.customer) throw noSuch('PaymentMethod', path.payment_method as string);
      return pm;
    },
  },
];
