/**
 * Payment intents with card payments only: confirming with a payment method charges it at
 * once (test cards that decline fail with Stripe's 402 card_error), manual capture holds the
 * funds until /capture. No 3-D Secure, no asynchronous methods.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch, StripeApiError } from '../errors.ts';
import type { Params } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { declineOf, disputeOf } from './cards.ts';
import { assignNullable, int, type Json, mergeMetadata, shipping, str } from './common.ts';
import { buildCharge, captureCharge, recordCharge } from './charges.ts';
import { crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { openDispute } from './disputes.ts';
import { CHARGES, CUSTOMERS, PAYMENT_INTENTS } from './names.ts';
import { resolvePaymentMethod } from './payment-methods.ts';

const CARD_OPTIONS = { card: { installments: null, mandate_options: null, network: null, request_three_d_secure: 'automatic' } };

export interface IntentInput {
  amount: number;
  currency: string;
  customer: string | null;
  description: string | null;
  metadata?: Record<string, string>;
  captureMethod?: string;
  receiptEmail?: string | null;
  paymentMethodTypes?: string[];
}

export function buildIntent(ctx: Ctx, i: IntentInput): StripeObject {
  const id = ctx.newId(PAYMENT_INTENTS.prefix);
  const automatic = !i.paymentMethodTypes;
  return {
    id,
    object: 'payment_intent',
    allowed_payment_method_types: null,
    amount: i.amount,
    amount_capturable: 0,
    amount_details: { tip: {} },
    amount_received: 0,
    application: null,
    application_fee_amount: null,
    automatic_payment_methods: automatic ? { allow_redirects: 'always', enabled: true } : null,
    canceled_at: null,
    cancellation_reason: null,
    capture_method: i.captureMethod ?? 'automatic_async',
    client_secret: `${id}_secret_${ctx.newId('x').slice(-25)}`,
    confirmation_method: 'automatic',
    created: ctx.now,
    currency: i.currency,
    customer: i.customer,
    customer_account: null,
    description: i.description,
    excluded_payment_method_types: null,
    last_payment_error: null,
    latest_charge: null,
    livemode: ctx.livemode,
    managed_payments: null,
    metadata: i.metadata ?? {},
    next_action: null,
    on_behalf_of: null,
    payment_method: null,
    payment_method_configuration_details: automatic ? { id: `pmc_1${ctx.account.tag}${ctx.account.tag.slice(0, 7)}`, parent: null } : null,
    payment_method_options: CARD_OPTIONS,
    payment_method_types: i.paymentMethodTypes ?? ['card'],
    processing: null,
    receipt_email: i.receiptEmail ?? null,
    review: null,
    setup_future_usage: null,
    shipping: null,
    statement_descriptor: null,
    statement_descriptor_suffix: null,
    status: 'requires_payment_method',
    transfer_data: null,
    transfer_group: null,
  };
}

const CONFIRMABLE = new Set(['requires_payment_method', 'requires_confirmation', 'requires_action']);

function unexpectedState(action: string, pi: StripeObject): StripeApiError {
  return invalidRequest(`You cannot ${action} this PaymentIntent because it has a status of ${String(pi.status)}.`, {
    code: 'payment_intent_unexpected_state',
  });
}

/**
 * Charges the intent's payment method. Declines are stored (failed charge, intent back to
 * requires_payment_method) and then thrown as the 402 Stripe answers with.
 */
export function confirmIntent(ctx: Ctx, pi: StripeObject, paymentMethodId: string | undefined): StripeObject {
  if (!CONFIRMABLE.has(pi.status as string)) throw unexpectedState('confirm', pi);
  const pmId = paymentMethodId ?? (pi.payment_method as string | null);
  if (!pmId) {
    throw invalidRequest(
      "You cannot confirm this PaymentIntent because it's missing a payment method. To confirm the PaymentIntent with " +
        `${String(pi.customer ?? 'a customer')}, specify a payment method attached to this customer along with the customer ID.`,
      { code: 'payment_intent_unexpected_state' },
    );
  }
  const pm = resolvePaymentMethod(ctx, pmId, 'payment_method');
  if (pi.customer && pm.customer && pm.customer !== pi.customer) {
    throw invalidRequest(`The provided PaymentMethod belongs to another customer.`, { param: 'payment_method' });
  }
  const decline = declineOf(pm);
  const capture = pi.capture_method !== 'manual';
  const charge = recordCharge(
    ctx,
    buildCharge(ctx, {
      amount: pi.amount as number,
      currency: pi.currency as string,
      customer: pi.customer as string | null,
      paymentIntent: pi.id,
      paymentMethod: pm,
      description: pi.description as string | null,
      receiptEmail: pi.receipt_email as string | null,
      capture,
      ...(decline ? { decline } : {}),
    }),
  );
  if (decline) {
    const error = {
      charge: charge.id,
      code: decline.code,
      ...(decline.decline_code ? { decline_code: decline.decline_code } : {}),
      doc_url: `https://stripe.com/docs/error-codes/${decline.code.replace(/_/g, '-')}`,
      message: decline.message,
      payment_method: pm,
      type: 'card_error',
    };
    const failed = ctx.save(
      PAYMENT_INTENTS,
      { ...pi, status: 'requires_payment_method', payment_method: null, latest_charge: charge.id, last_payment_error: error },
      'payment_intent.payment_failed',
    );
    throw new StripeApiError(402, 'card_error', decline.message, {
      code: decline.code,
      ...(decline.decline_code ? { decline_code: decline.decline_code } : {}),
      charge: charge.id,
      payment_intent: failed,
    });
  }
  const next: StripeObject = { ...pi, payment_method: pm.id, latest_charge: charge.id, last_payment_error: null };
  if (capture) {
    const succeeded = ctx.save(PAYMENT_INTENTS, { ...next, status: 'succeeded', amount_received: pi.amount }, 'payment_intent.succeeded');
    // Stripe's dispute test card: the payment succeeds, then the cardholder disputes it.
    const reason = disputeOf(pm);
    if (reason) openDispute(ctx, ctx.find(CHARGES, charge.id), { reason });
    return succeeded;
  }
  return ctx.save(PAYMENT_INTENTS, { ...next, status: 'requires_capture', amount_capturable: pi.amount }, 'payment_intent.amount_capturable_updated');
}

function checkCustomer(ctx: Ctx, p: Params): string | null {
  const customer = str(p.customer) ?? null;
  if (customer && !ctx.get(CUSTOMERS, customer)) throw noSuch('customer', customer, 'customer');
  return customer;
}

function create({ ctx, params }: Call): StripeObject {
  const amount = int(params.amount);
  if (amount === undefined) throw missingParam('amount');
  if (amount < 50) throw invalidRequest('Amount must be at least $0.50 usd', { code: 'amount_too_small', param: 'amount' });
  const types = Array.isArray(params.payment_method_types) ? params.payment_method_types.map(String) : undefined;
  let pi = buildIntent(ctx, {
    amount,
    currency: String(params.currency).toLowerCase(),
    customer: checkCustomer(ctx, params),
    description: str(params.description) ?? null,
    metadata: mergeMetadata({}, params.metadata),
    ...(typeof params.capture_method === 'string' ? { captureMethod: params.capture_method } : {}),
    receiptEmail: str(params.receipt_email) ?? null,
    ...(types ? { paymentMethodTypes: types } : {}),
  });
  assignNullable(pi, params, ['statement_descriptor', 'statement_descriptor_suffix', 'transfer_group', 'setup_future_usage']);
  if (params.shipping !== undefined) pi.shipping = shipping(params.shipping, null);
  const pm = str(params.payment_method);
  if (pm) {
    pi.payment_method = resolvePaymentMethod(ctx, pm, 'payment_method').id;
    pi.status = 'requires_confirmation';
  }
  pi = ctx.insert(PAYMENT_INTENTS, pi);
  return params.confirm === true ? confirmIntent(ctx, pi, undefined) : pi;
}

const UPDATABLE = new Set(['requires_payment_method', 'requires_confirmation', 'requires_action']);

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  const money = ['amount', 'currency', 'customer', 'payment_method', 'capture_method'].some((k) => params[k] !== undefined);
  if (money && !UPDATABLE.has(current.status as string)) throw unexpectedState('update', current);
  if (typeof params.amount === 'number') next.amount = params.amount;
  if (typeof params.currency === 'string') next.currency = params.currency.toLowerCase();
  if (params.customer !== undefined) next.customer = checkCustomer(ctx, params);
  if (typeof params.capture_method === 'string') next.capture_method = params.capture_method;
  if (typeof params.payment_method === 'string') {
    next.payment_method = params.payment_method === '' ? null : resolvePaymentMethod(ctx, params.payment_method, 'payment_method').id;
    next.status = next.payment_method ? 'requires_confirmation' : 'requires_payment_method';
  }
  assignNullable(next, params, ['description', 'receipt_email', 'statement_descriptor', 'statement_descriptor_suffix', 'transfer_group', 'setup_future_usage']);
  if (params.shipping !== undefined) next.shipping = shipping(params.shipping, current.shipping as Json | null);
  // Stripe has no payment_intent.updated event.
  return ctx.save(PAYMENT_INTENTS, next, null);
}

function capture({ ctx, params, path }: Call): StripeObject {
  const pi = ctx.find(PAYMENT_INTENTS, path.intent as string, 'intent');
  if (pi.status !== 'requires_capture') throw unexpectedState('capture', pi);
  const amount = int(params.amount_to_capture) ?? (pi.amount_capturable as number);
  if (amount > (pi.amount_capturable as number)) {
    throw invalidRequest('The amount to capture must be less than or equal to the amount capturable.', { param: 'amount_to_capture' });
  }
  captureCharge(ctx, ctx.find(CHARGES, pi.latest_charge as string), amount);
  return ctx.save(PAYMENT_INTENTS, { ...pi, status: 'succeeded', amount_capturable: 0, amount_received: amount }, 'payment_intent.succeeded');
}

const CANCELABLE = new Set(['requires_payment_method', 'requires_capture', 'requires_confirmation', 'requires_action', 'processing']);

export function cancelIntent(ctx: Ctx, pi: StripeObject, reason: string | null): StripeObject {
  if (!CANCELABLE.has(pi.status as string)) throw unexpectedState('cancel', pi);
  if (pi.status === 'requires_capture' && pi.latest_charge) {
    const charge = ctx.find(CHARGES, pi.latest_charge as string);
    ctx.save(CHARGES, { ...charge, refunded: true, amount_refunded: charge.amount }, 'charge.refunded');
  }
  return ctx.save(
    PAYMENT_INTENTS,
    { ...pi, status: 'canceled', canceled_at: ctx.now, cancellation_reason: reason, amount_capturable: 0 },
    'payment_intent.canceled',
  );
}

const paymentIntents: ResourceDef = {
  ...PAYMENT_INTENTS,
  path: '/v1/payment_intents',
  idParam: 'intent',
  create,
  update,
  filter: ({ params }) => fieldFilter(params, ['customer']),
};

export const paymentIntentRoutes: Route[] = [
  ...crudRoutes(paymentIntents),
  {
    method: 'POST',
    template: '/v1/payment_intents/{intent}/confirm',
    group: PAYMENT_INTENTS.group,
    handler: ({ ctx, params, path }) => confirmIntent(ctx, ctx.find(PAYMENT_INTENTS, path.intent as string, 'intent'), str(params.payment_method)),
  },
  { method: 'POST', template: '/v1/payment_intents/{intent}/capture', group: PAYMENT_INTENTS.group, handler: capture },
  {
    method: 'POST',
    template: '/v1/payment_intents/{intent}/cancel',
    group: PAYMENT_INTENTS.group,
    handler: ({ ctx, params, path }) => cancelIntent(ctx, ctx.find(PAYMENT_INTENTS, path.intent as string, 'intent'), str(params.cancellation_reason) ?? null),
  },
];
