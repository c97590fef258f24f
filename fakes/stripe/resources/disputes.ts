/**
 * Disputes. Card networks open them, not the API: the generator and the control API's
 * create('disputes', { charge }) do. The API reads, updates (evidence, metadata) and closes.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import type { Params } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { createBalanceTransaction } from './charges.ts';
import { int, isHash, type Json, mergeMetadata, str } from './common.ts';
import { crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { CHARGES, DISPUTES } from './names.ts';

const EVIDENCE_FIELDS = [
  'access_activity_log',
  'billing_address',
  'cancellation_policy',
  'cancellation_policy_disclosure',
  'cancellation_rebuttal',
  'customer_communication',
  'customer_email_address',
  'customer_name',
  'customer_purchase_ip',
  'customer_signature',
  'duplicate_charge_documentation',
  'duplicate_charge_explanation',
  'duplicate_charge_id',
  'product_description',
  'receipt',
  'refund_policy',
  'refund_policy_disclosure',
  'refund_refusal_explanation',
  'service_date',
  'service_documentation',
  'shipping_address',
  'shipping_carrier',
  'shipping_date',
  'shipping_documentation',
  'shipping_tracking_number',
  'uncategorized_file',
  'uncategorized_text',
];

export const DISPUTE_REASONS = [
  'fraudulent',
  'product_not_received',
  'subscription_canceled',
  'duplicate',
  'general',
  'product_unacceptable',
  'credit_not_processed',
];

function emptyEvidence(): Json {
  const e: Json = {};
  for (const k of EVIDENCE_FIELDS) {
    e[k] = null;
    if (k === 'duplicate_charge_id') e.enhanced_evidence = {};
  }
  return e;
}

/** Opens a dispute on a charge: the charge is marked disputed and the amount plus fee held back. */
export function openDispute(ctx: Ctx, charge: StripeObject, o: { amount?: number; reason?: string; status?: string }): StripeObject {
  const amount = o.amount ?? (charge.amount as number);
  const id = ctx.newId(DISPUTES.prefix);
  const withdrawal = createBalanceTransaction(ctx, {
    amount: -amount,
    currency: charge.currency as string,
    type: 'adjustment',
    source: id,
    description: `Chargeback withdrawal for ${charge.id}`,
    fee: 1500,
    settleDays: 0,
  });
  const card = (charge.payment_method_details as { card?: Json } | null)?.card ?? {};
  const dispute: StripeObject = {
    id,
    object: 'dispute',
    amount,
    balance_transactions: [withdrawal],
    charge: charge.id,
    created: ctx.now,
    currency: charge.currency,
    enhanced_eligibility_types: [],
    evidence: emptyEvidence(),
    evidence_details: { due_by: ctx.now + 21 * 86_400, enhanced_eligibility: {}, has_evidence: false, past_due: false, submission_count: 0 },
    is_charge_refundable: false,
    livemode: ctx.livemode,
    metadata: {},
    payment_intent: charge.payment_intent,
    payment_method_details: { card: { brand: card.brand ?? 'visa', case_type: 'chargeback', network_reason_code: '10.4' }, type: 'card' },
    reason: o.reason ?? 'fraudulent',
    status: o.status ?? 'needs_response',
  };
  ctx.insert(DISPUTES, dispute);
  ctx.save(CHARGES, { ...charge, disputed: true });
  return dispute;
}

export function createDispute(ctx: Ctx, p: Params): StripeObject {
  const chargeId = str(p.charge);
  if (!chargeId) throw missingParam('charge');
  const charge = ctx.get(CHARGES, chargeId);
  if (!charge) throw noSuch('charge', chargeId, 'charge');
  if (charge.disputed === true) throw invalidRequest(`Charge ${chargeId} is already disputed.`);
  const amount = int(p.amount);
  return openDispute(ctx, charge, { ...(amount !== undefined ? { amount } : {}), ...(str(p.reason) ? { reason: p.reason as string } : {}) });
}

const CLOSED = new Set(['won', 'lost', 'warning_closed', 'prevented']);

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  if (CLOSED.has(current.status as string)) throw invalidRequest('This dispute is already closed.', { code: 'dispute_already_closed' });
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  if (isHash(params.evidence)) {
    next.evidence = { ...(current.evidence as Json), ...params.evidence };
    next.evidence_details = { ...(current.evidence_details as Json), has_evidence: true };
  }
  if (params.submit !== false && isHash(params.evidence)) {
    const details = next.evidence_details as Json;
    next.evidence_details = { ...details, submission_count: (details.submission_count as number) + 1 };
    next.status = 'under_review';
  }
  return ctx.save(DISPUTES, next);
}

function close({ ctx, path }: Call): StripeObject {
  const dispute = ctx.find(DISPUTES, path.dispute as string, 'dispute');
  if (CLOSED.has(dispute.status as string)) throw invalidRequest('This dispute is already closed.', { code: 'dispute_already_closed' });
  return ctx.save(DISPUTES, { ...dispute, status: 'lost' }, 'charge.dispute.closed');
}

const disputes: ResourceDef = {
  ...DISPUTES,
  path: '/v1/disputes',
  idParam: 'dispute',
  update,
  filter: ({ params }) => fieldFilter(params, ['charge', 'payment_intent']),
};

export const disputeRoutes: Route[] = [
  ...crudRoutes(disputes),
  { method: 'POST', template: '/v1/disputes/{dispute}/close', group: DISPUTES.group, handler: close },
];
