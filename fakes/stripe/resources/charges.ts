/**
 * Charges and the balance transactions money movements leave. Charges are made by payment
 * intents (and the generator), never directly; the API reads, updates and lists them.
 */
import type { Ctx } from '../context.ts';
import { noSuch } from '../errors.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import type { TestCard } from './cards.ts';
import { assignNullable, type Json, mergeMetadata, shipping } from './common.ts';
import { crudRoutes, fieldFilter, listPage, type ResourceDef } from './crud.ts';
import { BALANCE_TRANSACTIONS, CHARGES, REFUNDS } from './names.ts';

const DAY = 86_400;

/** Stripe's standard US card pricing: 2.9 % + 30¢. */
export function cardFee(amount: number): number {
  return Math.round(amount * 0.029) + 30;
}

export interface BalanceInput {
  amount: number;
  currency: string;
  type: 'charge' | 'refund' | 'payout' | 'adjustment' | 'payment';
  source: string;
  description: string | null;
  fee?: number;
  /** Days until the funds are available (payments settle in 2). */
  settleDays?: number;
}

const REPORTING: Record<BalanceInput['type'], string> = {
  charge: 'charge',
  payment: 'charge',
  refund: 'refund',
  payout: 'payout',
  adjustment: 'dispute',
};

export function createBalanceTransaction(ctx: Ctx, b: BalanceInput): StripeObject {
  const fee = b.fee ?? 0;
  const created = ctx.now;
  const availableOn = created + (b.settleDays ?? 2) * DAY;
  const txn: StripeObject = {
    id: ctx.newId(BALANCE_TRANSACTIONS.prefix),
    object: 'balance_transaction',
    amount: b.amount,
    available_on: availableOn,
    balance_type: 'payments',
    created,
    currency: b.currency,
    description: b.description,
    exchange_rate: null,
    fee,
    fee_details: fee > 0 ? [{ amount: fee, application: null, currency: b.currency, description: 'Stripe processing fees', type: 'stripe_fee' }] : [],
    net: b.amount - fee,
    reporting_category: REPORTING[b.type],
    source: b.source,
    status: availableOn <= ctx.clock.now() ? 'available' : 'pending',
    type: b.type,
  };
  return ctx.insert(BALANCE_TRANSACTIONS, txn);
}

/** A balance transaction's status moves from pending to available with time, with no event. */
export function renderBalanceTransaction(ctx: Ctx, txn: StripeObject): StripeObject {
  const status = (txn.available_on as number) <= ctx.clock.now() ? 'available' : 'pending';
  return txn.status === status ? txn : { ...txn, status };
}

export function cardPaymentDetails(card: Json, amount: number): Json {
  return {
    card: {
      amount_authorized: amount,
      authorization_code: null,
      brand: card.brand,
      checks: card.checks,
      country: card.country,
      exp_month: card.exp_month,
      exp_year: card.exp_year,
      extended_authorization: { status: 'disabled' },
      fingerprint: card.fingerprint,
      funding: card.funding,
      incremental_authorization: { status: 'unavailable' },
      installments: null,
      last4: card.last4,
      mandate: null,
      multicapture: { status: 'unavailable' },
      network: card.brand,
      network_token: { used: false },
      network_transaction_id: null,
      overcapture: { maximum_amount_capturable: amount, status: 'unavailable' },
      regulated_status: card.regulated_status ?? 'unregulated',
      three_d_secure: null,
      wallet: null,
    },
    type: 'card',
  };
}

export interface ChargeInput {
  amount: number;
  currency: string;
  customer: string | null;
  paymentIntent: string | null;
  paymentMethod: StripeObject;
  description: string | null;
  receiptEmail: string | null;
  capture: boolean;
  decline?: TestCard['decline'];
  metadata?: Record<string, string>;
}

const SUCCESS_OUTCOME = {
  advice_code: null,
  network_advice_code: null,
  network_decline_code: null,
  network_status: 'approved_by_network',
  reason: null,
  risk_level: 'normal',
  risk_score: 32,
  seller_message: 'Payment complete.',
  type: 'authorized',
};

/** A charge from a payment attempt: succeeded (with its balance transaction when captured) or failed. */
export function buildCharge(ctx: Ctx, c: ChargeInput): StripeObject {
  const id = ctx.newId(CHARGES.prefix);
  const failed = c.decline !== undefined;
  const captured = !failed && c.capture;
  const card = c.paymentMethod.card as Json;
  return {
    id,
    object: 'charge',
    amount: c.amount,
    amount_captured: captured ? c.amount : 0,
    amount_refunded: 0,
    application: null,
    application_fee: null,
    application_fee_amount: null,
    balance_transaction: null,
    billing_details: c.paymentMethod.billing_details,
    calculated_statement_descriptor: 'EXAMPLE SHOP',
    captured,
    created: ctx.now,
    currency: c.currency,
    customer: c.customer,
    description: c.description,
    disputed: false,
    failure_balance_transaction: null,
    failure_code: failed ? (c.decline?.code ?? null) : null,
    failure_message: failed ? (c.decline?.message ?? null) : null,
    fraud_details: {},
    livemode: ctx.livemode,
    metadata: c.metadata ?? {},
    on_behalf_of: null,
    outcome: failed
      ? {
          ...SUCCESS_OUTCOME,
          network_status: 'declined_by_network',
          reason: c.decline?.decline_code ?? null,
          seller_message: 'The bank did not return any further details with this decline.',
          type: 'issuer_declined',
        }
      : SUCCESS_OUTCOME,
    paid: !failed,
    payment_intent: c.paymentIntent,
    payment_method: c.paymentMethod.id,
    payment_method_details: cardPaymentDetails(card, c.amount),
    receipt_email: c.receiptEmail,
    receipt_number: null,
    receipt_url: `https://pay.stripe.com/receipts/payment/${id.slice(3)}`,
    refunded: false,
    review: null,
    shipping: null,
    source_transfer: null,
    statement_descriptor: null,
    statement_descriptor_suffix: null,
    status: failed ? 'failed' : 'succeeded',
    transfer_data: null,
    transfer_group: null,
  };
}

/** Stores a charge with its events; a captured one gets its balance transaction first. */
export function recordCharge(ctx: Ctx, charge: StripeObject): StripeObject {
  let stored = charge;
  if (charge.captured) {
    const txn = createBalanceTransaction(ctx, {
      amount: charge.amount as number,
      currency: charge.currency as string,
      type: 'charge',
      source: charge.id,
      description: charge.description as string | null,
      fee: cardFee(charge.amount as number),
    });
    stored = { ...charge, balance_transaction: txn.id };
  }
  ctx.insert(CHARGES, stored, charge.status === 'failed' ? 'charge.failed' : 'charge.succeeded');
  return stored;
}

/** Captures an authorized charge (payment intents with capture_method=manual). */
export function captureCharge(ctx: Ctx, charge: StripeObject, amount: number): StripeObject {
  const txn = createBalanceTransaction(ctx, {
    amount,
    currency: charge.currency as string,
    type: 'charge',
    source: charge.id,
    description: charge.description as string | null,
    fee: cardFee(amount),
  });
  const uncaptured = (charge.amount as number) - amount;
  return ctx.save(
    CHARGES,
    {
      ...charge,
      captured: true,
      amount_captured: amount,
      amount_refunded: uncaptured,
      refunded: uncaptured > 0 && uncaptured === charge.amount,
      balance_transaction: txn.id,
    },
    'charge.captured',
  );
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  assignNullable(next, params, ['description', 'receipt_email', 'transfer_group']);
  if (params.shipping !== undefined) next.shipping = shipping(params.shipping, current.shipping as Json | null);
  if (params.fraud_details !== undefined) next.fraud_details = typeof params.fraud_details === 'object' && params.fraud_details ? params.fraud_details : {};
  return ctx.save(CHARGES, next);
}

const charges: ResourceDef = {
  ...CHARGES,
  path: '/v1/charges',
  idParam: 'charge',
  update,
  filter: ({ params }) => fieldFilter(params, ['customer', 'payment_intent', 'transfer_group']),
};

const balanceTransactions: ResourceDef = {
  ...BALANCE_TRANSACTIONS,
  path: '/v1/balance_transactions',
  idParam: 'id',
  filter: ({ params }) => fieldFilter(params, ['currency', 'source', 'type']),
};

export function chargeRefunds(ctx: Ctx, chargeId: string, params: Call['params']): unknown {
  ctx.find(CHARGES, chargeId, 'charge');
  return listPage(ctx, REFUNDS, params, `/v1/charges/${chargeId}/refunds`, (r) => r.charge === chargeId);
}

export const chargeRoutes: Route[] = [
  ...crudRoutes(charges),
  ...crudRoutes(balanceTransactions),
  {
    method: 'GET',
    template: '/v1/charges/{charge}/refunds',
    group: CHARGES.group,
    handler: ({ ctx, params, path }) => chargeRefunds(ctx, path.charge as string, params),
  },
  {
    method: 'GET',
    template: '/v1/charges/{charge}/refunds/{refund}',
    group: CHARGES.group,
    handler: ({ ctx, path }) => {
      const refund = ctx.get(REFUNDS, path.refund as string);
      if (!refund || refund.charge !== path.charge) throw noSuch('refund', path.refund as string);
      return refund;
    },
  },
];
