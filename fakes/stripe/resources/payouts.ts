/**
 * Payouts to the account's bank account. API payouts need available balance (the sum of
 * balance transactions already available); they stay `pending` — the fake runs no bank.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest } from '../errors.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { createBalanceTransaction } from './charges.ts';
import { int, mergeMetadata, str } from './common.ts';
import { both, crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { inRange } from '../lists.ts';
import { BALANCE_TRANSACTIONS, PAYOUTS } from './names.ts';

/** Available balance in a currency: what has settled, net of fees. */
export function availableBalance(ctx: Ctx, currency: string): number {
  const now = ctx.clock.now();
  let sum = 0;
  for (const t of ctx.col(BALANCE_TRANSACTIONS.name).values()) {
    if (t.currency === currency && (t.available_on as number) <= now) sum += t.net as number;
  }
  return sum;
}

export function bankAccountId(ctx: Ctx): string {
  return `ba_1${ctx.account.tag}${ctx.account.tag.slice(0, 7)}${ctx.account.tag.slice(0, 8)}`.slice(0, 27);
}

export function buildPayout(
  ctx: Ctx,
  o: { amount: number; currency: string; automatic: boolean; status: string; arrival: number; description?: string | null; method?: string },
): StripeObject {
  return {
    id: ctx.newId(PAYOUTS.prefix),
    object: 'payout',
    amount: o.amount,
    application_fee: null,
    application_fee_amount: null,
    arrival_date: o.arrival,
    automatic: o.automatic,
    balance_transaction: null,
    created: ctx.now,
    currency: o.currency,
    description: o.description ?? 'STRIPE PAYOUT',
    destination: bankAccountId(ctx),
    failure_balance_transaction: null,
    failure_code: null,
    failure_message: null,
    livemode: ctx.livemode,
    metadata: {},
    method: o.method ?? 'standard',
    original_payout: null,
    payout_method: null,
    reconciliation_status: o.automatic ? 'completed' : 'not_applicable',
    reversed_by: null,
    source_type: 'card',
    statement_descriptor: null,
    status: o.status,
    trace_id: o.status === 'paid' ? { status: 'supported', value: null } : null,
    type: 'bank_account',
  };
}

function create({ ctx, params }: Call): StripeObject {
  const amount = int(params.amount) as number;
  const currency = String(params.currency).toLowerCase();
  if (amount <= 0) throw invalidRequest('Invalid positive integer', { param: 'amount' });
  if (availableBalance(ctx, currency) < amount) {
    throw invalidRequest(
      'You have insufficient funds in your Stripe account for this transfer. Your card balance is too low. You can use the /v1/balance endpoint to view your Stripe balance (for more details, see stripe.com/docs/api#balance).',
      {
        code: 'balance_insufficient',
        param: 'amount',
      },
    );
  }
  const payout = buildPayout(ctx, {
    amount,
    currency,
    automatic: false,
    status: 'pending',
    arrival: ctx.now + 2 * 86_400,
    description: str(params.description) ?? 'STRIPE PAYOUT',
    method: (params.method as string | undefined) ?? 'standard',
  });
  payout.metadata = mergeMetadata({}, params.metadata);
  if (str(params.statement_descriptor)) payout.statement_descriptor = params.statement_descriptor;
  const txn = createBalanceTransaction(ctx, {
    amount: -amount,
    currency,
    type: 'payout',
    source: payout.id,
    description: payout.description as string,
    settleDays: 0,
  });
  return ctx.insert(PAYOUTS, { ...payout, balance_transaction: txn.id });
}

function cancel({ ctx, path }: Call): StripeObject {
  const payout = ctx.find(PAYOUTS, path.payout as string, 'payout');
  if (payout.status !== 'pending') throw invalidRequest(`Payouts can only be canceled while they are pending; this payout is ${String(payout.status)}.`);
  const reversal = createBalanceTransaction(ctx, {
    amount: payout.amount as number,
    currency: payout.currency as string,
    type: 'payout',
    source: payout.id,
    description: 'Payout cancellation',
    settleDays: 0,
  });
  return ctx.save(PAYOUTS, { ...payout, status: 'canceled', failure_balance_transaction: reversal.id }, 'payout.canceled');
}

const payouts: ResourceDef = {
  ...PAYOUTS,
  path: '/v1/payouts',
  idParam: 'payout',
  create,
  update: ({ ctx, params }, current) => ctx.save(PAYOUTS, { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) }),
  filter: ({ params }) =>
    both(fieldFilter(params, ['status', 'destination']), params.arrival_date !== undefined ? (o) => inRange(o.arrival_date, params.arrival_date) : undefined),
};

export const payoutRoutes: Route[] = [
  ...crudRoutes(payouts),
  { method: 'POST', template: '/v1/payouts/{payout}/cancel', group: PAYOUTS.group, handler: cancel },
];
