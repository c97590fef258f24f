/**
 * Refunds of card charges: they succeed at once, leave a negative balance transaction and
 * move the charge's amount_refunded (charge.refunded).
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, noSuch } from '../errors.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { int, mergeMetadata, str } from './common.ts';
import { createBalanceTransaction } from './charges.ts';
import { crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { CHARGES, PAYMENT_INTENTS, REFUNDS } from './names.ts';

function money(amount: number, currency: string): string {
  return currency === 'usd' ? `$${(amount / 100).toFixed(2)}` : `${(amount / 100).toFixed(2)} ${currency.toUpperCase()}`;
}

export interface RefundInput {
  charge: StripeObject;
  amount?: number;
  reason?: string | null;
  metadata?: Record<string, string>;
}

/** Refunds (part of) a charge; returns the refund. */
export function refundCharge(ctx: Ctx, r: RefundInput): StripeObject {
  const charge = r.charge;
  if (charge.status !== 'succeeded' || charge.captured !== true) {
    throw invalidRequest(`Charge ${charge.id} has not been captured, so it cannot be refunded.`, { code: 'charge_not_refundable' });
  }
  const remaining = (charge.amount as number) - (charge.amount_refunded as number);
  if (remaining <= 0) throw invalidRequest(`Charge ${charge.id} has already been refunded.`, { code: 'charge_already_refunded' });
  const amount = r.amount ?? remaining;
  if (amount <= 0) throw invalidRequest('Invalid positive integer', { param: 'amount' });
  if (amount > remaining) {
    const currency = charge.currency as string;
    throw invalidRequest(`Refund amount (${money(amount, currency)}) is greater than unrefunded amount on charge (${money(remaining, currency)})`, {
      param: 'amount',
    });
  }
  const id = ctx.newId(REFUNDS.prefix);
  const txn = createBalanceTransaction(ctx, {
    amount: -amount,
    currency: charge.currency as string,
    type: 'refund',
    source: id,
    description: 'REFUND FOR CHARGE',
    settleDays: 0,
  });
  const refund: StripeObject = {
    id,
    object: 'refund',
    amount,
    balance_transaction: txn.id,
    charge: charge.id,
    created: ctx.now,
    currency: charge.currency,
    customer: charge.customer,
    customer_account: null,
    destination_details: { card: { reference: null, reference_status: 'pending', reference_type: 'acquirer_reference_number', type: 'refund' }, type: 'card' },
    metadata: r.metadata ?? {},
    payment_intent: charge.payment_intent,
    payment_method: charge.payment_method,
    reason: r.reason ?? null,
    receipt_number: null,
    source_transfer_reversal: null,
    status: 'succeeded',
    transfer_reversal: null,
  };
  ctx.insert(REFUNDS, refund);
  const refunded = (charge.amount_refunded as number) + amount;
  ctx.save(CHARGES, { ...charge, amount_refunded: refunded, refunded: refunded === charge.amount }, 'charge.refunded');
  return refund;
}

function create({ ctx, params }: Call): StripeObject {
  let chargeId = str(params.charge);
  const piId = str(params.payment_intent);
  if (!chargeId && !piId)
    throw invalidRequest('One of the following params should be provided for this request: payment_intent or charge.', { param: 'charge' });
  if (piId) {
    const pi = ctx.get(PAYMENT_INTENTS, piId);
    if (!pi) throw noSuch('payment_intent', piId, 'payment_intent');
    if (chargeId && pi.latest_charge !== chargeId) throw invalidRequest('The charge does not belong to the payment intent.', { param: 'charge' });
    if (!pi.latest_charge || pi.status !== 'succeeded') {
      throw invalidRequest(`This PaymentIntent (${piId}) does not have a successful charge to refund.`, {
        code: 'charge_not_refundable',
        param: 'payment_intent',
      });
    }
    chargeId = pi.latest_charge as string;
  }
  const charge = ctx.get(CHARGES, chargeId as string);
  if (!charge) throw noSuch('charge', chargeId as string, 'charge');
  const amount = int(params.amount);
  return refundCharge(ctx, {
    charge,
    ...(amount !== undefined ? { amount } : {}),
    reason: str(params.reason) ?? null,
    metadata: mergeMetadata({}, params.metadata),
  });
}

const refunds: ResourceDef = {
  ...REFUNDS,
  path: '/v1/refunds',
  idParam: 'refund',
  create,
  update: ({ ctx, params }, current) => ctx.save(REFUNDS, { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) }),
  filter: ({ params }) => fieldFilter(params, ['charge', 'payment_intent']),
};

export const refundRoutes: Route[] = crudRoutes(refunds);
