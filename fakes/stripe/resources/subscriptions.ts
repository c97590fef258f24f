/**
 * Subscriptions. Creating one drafts, finalizes and (charge_automatically)
 * pays its first invoice with the customer's default payment method; without one, or on a
 * decline, the subscription stays `incomplete`. DELETE cancels: the subscription stays, with
 * status canceled (customer.subscription.deleted). Real time passing does not bill; a test
 * clock's advance does (test-clocks.ts). A test-clock customer's subscriptions live at the
 * clock's time, and lists leave them out unless asked by `test_clock` or `customer`, as Stripe's do.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch, StripeApiError } from '../errors.ts';
import type { Params, Value } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { addInterval, subscriptionLine } from './billing.ts';
import { bool, embeddedList, int, isHash, type Json, mergeMetadata, str } from './common.ts';
import { both, crudRoutes, fieldFilter, listPage, type ResourceDef } from './crud.ts';
import { customerTime } from './clock-time.ts';
import { fixCurrency } from './customers.ts';
import { discountsFor } from './discounts.ts';
import { buildInvoice, claimPendingItems, finalizeInvoice, payInvoice, withLines } from './invoice-model.ts';
import { CUSTOMERS, INVOICES, PAYMENT_METHODS, SUBSCRIPTION_ITEMS, SUBSCRIPTIONS } from './names.ts';
import { applyItemChanges, buildItem, checkIntervals, itemPrice, itemsOf, withItems } from './subscription-items.ts';

function defaultPaymentMethod(ctx: Ctx, customerId: string, v: Value | undefined): string | null {
  const id = str(v);
  if (!id) return null;
  const pm = ctx.get(PAYMENT_METHODS, id);
  if (!pm) throw noSuch('PaymentMethod', id, 'default_payment_method');
  if (pm.customer !== customerId) {
    throw invalidRequest(`The customer does not have a payment method with the ID ${id}. The payment method must be attached to the customer.`, {
      param: 'default_payment_method',
    });
  }
  return id;
}

export interface SubscriptionFields {
  id: string;
  customer: string;
  currency: string;
  start: number;
  anchor: number;
  status: string;
  trialEnd?: number | null;
  collectionMethod?: string;
  daysUntilDue?: number | null;
  defaultPaymentMethod?: string | null;
  description?: string | null;
  metadata?: Record<string, string>;
  cancelAt?: number | null;
  cancelAtPeriodEnd?: boolean;
  testClock?: string | null;
}

/** The subscription object without its items (withItems adds them). */
export function subscriptionTemplate(ctx: Ctx, f: SubscriptionFields): StripeObject {
  return {
    id: f.id,
    object: 'subscription',
    application: null,
    application_fee_percent: null,
    automatic_tax: { disabled_reason: null, enabled: false, liability: null },
    billing_cycle_anchor: f.anchor,
    billing_cycle_anchor_config: null,
    billing_mode: { flexible: null, type: 'classic' },
    billing_schedules: [],
    billing_thresholds: null,
    cancel_at: f.cancelAt ?? null,
    cancel_at_period_end: f.cancelAtPeriodEnd ?? false,
    canceled_at: null,
    cancellation_details: { comment: null, feedback: null, feedback_option: null, reason: null },
    collection_method: f.collectionMethod ?? 'charge_automatically',
    created: ctx.now,
    currency: f.currency,
    customer: f.customer,
    customer_account: null,
    days_until_due: f.daysUntilDue ?? null,
    default_payment_method: f.defaultPaymentMethod ?? null,
    default_source: null,
    default_tax_rates: [],
    description: f.description ?? null,
    discounts: [],
    ended_at: null,
    invoice_settings: { account_tax_ids: null, custom_fields: null, description: null, footer: null, issuer: { type: 'self' } },
    items: embeddedList([], `/v1/subscription_items?subscription=${f.id}`),
    latest_invoice: null,
    livemode: ctx.livemode,
    managed_payments: null,
    metadata: f.metadata ?? {},
    next_pending_invoice_item_invoice: null,
    on_behalf_of: null,
    pause_collection: null,
    payment_settings: { payment_method_options: null, payment_method_types: null, save_default_payment_method: 'off' },
    pending_invoice_item_interval: null,
    pending_setup_intent: null,
    pending_update: null,
    schedule: null,
    start_date: f.start,
    status: f.status,
    test_clock: f.testClock ?? null,
    transfer_data: null,
    trial_end: f.trialEnd ?? null,
    trial_settings: { end_behavior: { missing_payment_method: 'create_invoice' } },
    trial_start: f.trialEnd != null ? f.start : null,
  };
}

export function createSubscription(requestCtx: Ctx, params: Params): StripeObject {
  const customerId = str(params.customer);
  if (!customerId) throw missingParam('customer');
  const customer = requestCtx.get(CUSTOMERS, customerId);
  if (!customer) throw noSuch('customer', customerId, 'customer');
  // A test-clock customer's subscription starts at the clock's frozen time.
  const ctx = customerTime(requestCtx, customerId);
  const itemParams = Array.isArray(params.items) ? params.items.filter(isHash) : [];
  if (itemParams.length === 0) throw missingParam('items');
  const prices = itemParams.map((it, i) => itemPrice(ctx, it, `items[${i}]`));
  checkIntervals(prices, 'items');
  const first = prices[0] as StripeObject;
  const currency = first.currency as string;
  const collection = (params.collection_method as string | undefined) ?? 'charge_automatically';
  const daysUntilDue = int(params.days_until_due) ?? null;
  if (collection === 'send_invoice' && daysUntilDue === null) throw missingParam('days_until_due');
  const paymentMethod = defaultPaymentMethod(ctx, customerId, params.default_payment_method);
  const id = ctx.newId(SUBSCRIPTIONS.prefix);
  const discounts = discountsFor(ctx, { id, customer: customerId }, params.discounts, []);
  // Everything is checked: from here on the subscription is made.
  fixCurrency(ctx, customerId, currency, 'items');

  const start = int(params.backdate_start_date) ?? ctx.now;
  const trialDays = int(params.trial_period_days);
  const trialEnd = params.trial_end === 'now' ? null : (int(params.trial_end) ?? (trialDays !== undefined ? start + trialDays * 86_400 : null));
  const recurring = first.recurring as { interval: string; interval_count: number };
  const anchorParam = int(params.billing_cycle_anchor);
  // The first period ends with the trial, at a future billing anchor (unprorated), or one interval on.
  let end: number;
  if (trialEnd !== null) end = trialEnd;
  else if (anchorParam !== undefined && anchorParam > start) end = anchorParam;
  else end = addInterval(start, recurring.interval, recurring.interval_count);
  const anchor = anchorParam ?? trialEnd ?? start;
  const period = { start, end };

  itemParams.forEach((it, i) => {
    const quantity = int(it.quantity) ?? 1;
    ctx.col(SUBSCRIPTION_ITEMS.name).insert(buildItem(ctx, id, prices[i] as StripeObject, quantity, mergeMetadata({}, it.metadata), period));
  });
  const cancelAtPeriodEnd = bool(params.cancel_at_period_end) ?? false;
  const sub = withItems(
    ctx,
    subscriptionTemplate(ctx, {
      id,
      customer: customerId,
      currency,
      start,
      anchor,
      trialEnd,
      status: trialEnd !== null ? 'trialing' : 'incomplete',
      collectionMethod: collection,
      daysUntilDue,
      defaultPaymentMethod: paymentMethod,
      description: str(params.description) ?? null,
      metadata: mergeMetadata({}, params.metadata),
      cancelAt: cancelAtPeriodEnd ? period.end : (int(params.cancel_at) ?? null),
      cancelAtPeriodEnd,
      testClock: (customer.test_clock as string | null | undefined) ?? null,
    }),
  );
  sub.discounts = discounts.ids;
  ctx.insert(SUBSCRIPTIONS, sub);
  discounts.emit();
  return firstInvoice(ctx, sub, customer, params);
}

/** The subscription_create invoice: drafted, finalized, paid (or not), and the status that follows. */
function firstInvoice(ctx: Ctx, sub: StripeObject, customer: StripeObject, params: Params): StripeObject {
  const trial = sub.status === 'trialing';
  let invoice = buildInvoice(ctx, {
    customer,
    currency: sub.currency as string,
    billingReason: 'subscription_create',
    collectionMethod: sub.collection_method as string,
    subscription: sub,
    autoAdvance: sub.collection_method === 'charge_automatically',
    daysUntilDue: sub.days_until_due as number | null,
    defaultPaymentMethod: sub.default_payment_method as string | null,
  });
  const lines = itemsOf(ctx, sub.id).map((item) =>
    subscriptionLine(
      ctx,
      sub.id,
      { id: item.id, price: item.price as StripeObject, quantity: (item.quantity as number | undefined) ?? 1 },
      {
        id: ctx.newId('il'),
        invoice: invoice.id,
        period: { start: item.current_period_start as number, end: item.current_period_end as number },
        trial,
      },
    ),
  );
  lines.push(...claimPendingItems(ctx, customer.id, invoice.id, sub.id));
  // invoice.created carries the lines, as Stripe's does.
  invoice = ctx.insert(INVOICES, withLines(ctx, invoice, lines));
  invoice = finalizeInvoice(ctx, invoice);
  let status = sub.status as string;
  const behavior = (params.payment_behavior as string | undefined) ?? 'allow_incomplete';
  let failure: unknown;
  if (invoice.status === 'paid') status = trial ? 'trialing' : 'active';
  else if (sub.collection_method === 'send_invoice') status = 'active';
  else if (behavior !== 'default_incomplete') {
    try {
      invoice = payInvoice(ctx, invoice);
      status = 'active';
    } catch (e) {
      if (!(e instanceof StripeApiError)) throw e;
      failure = e;
    }
  }
  const saved = ctx.save(SUBSCRIPTIONS, { ...sub, latest_invoice: invoice.id, status });
  if (failure && behavior === 'error_if_incomplete') throw failure;
  return saved;
}

export function cancelSubscription(requestCtx: Ctx, sub: StripeObject, params: Params): StripeObject {
  const ctx = customerTime(requestCtx, sub.customer as string);
  if (sub.status === 'canceled') throw invalidRequest(`A canceled subscription can only update its cancellation_details and metadata.`);
  const details = isHash(params.cancellation_details) ? params.cancellation_details : {};
  return ctx.save(
    SUBSCRIPTIONS,
    {
      ...sub,
      canceled_at: ctx.now,
      cancellation_details: {
        comment: str(details.comment) ?? null,
        feedback: str(details.feedback) ?? null,
        feedback_option: null,
        reason: 'cancellation_requested',
      },
      ended_at: ctx.now,
      status: 'canceled',
    },
    'customer.subscription.deleted',
  );
}

function update({ ctx: requestCtx, params }: Call, current: StripeObject): StripeObject {
  const ctx = customerTime(requestCtx, current.customer as string);
  const changesItems = Array.isArray(params.items);
  if (current.status === 'canceled' && Object.keys(params).some((k) => !['metadata', 'cancellation_details', 'expand'].includes(k))) {
    throw invalidRequest('A canceled subscription can only update its cancellation_details and metadata.');
  }
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  if (params.description !== undefined) next.description = params.description === '' ? null : params.description;
  if (params.default_payment_method !== undefined)
    next.default_payment_method = defaultPaymentMethod(ctx, current.customer as string, params.default_payment_method);
  if (typeof params.collection_method === 'string') next.collection_method = params.collection_method;
  if (params.days_until_due !== undefined) next.days_until_due = params.days_until_due === '' ? null : params.days_until_due;
  if (next.collection_method === 'send_invoice' && next.days_until_due === null) throw missingParam('days_until_due');
  const firstItem = itemsOf(ctx, current.id)[0];
  if (typeof params.cancel_at_period_end === 'boolean') {
    next.cancel_at_period_end = params.cancel_at_period_end;
    next.cancel_at = params.cancel_at_period_end ? (firstItem?.current_period_end ?? null) : null;
  }
  if (params.cancel_at !== undefined) {
    next.cancel_at = params.cancel_at === '' ? null : params.cancel_at;
    next.cancel_at_period_end = false;
  }
  if (params.pause_collection !== undefined) {
    next.pause_collection = isHash(params.pause_collection)
      ? { behavior: params.pause_collection.behavior, resumes_at: params.pause_collection.resumes_at ?? null }
      : null;
  }
  if (params.trial_end === 'now' && current.status === 'trialing') {
    next.trial_end = ctx.now;
    next.status = 'active';
  }
  if (isHash(params.cancellation_details)) {
    next.cancellation_details = { ...(current.cancellation_details as Json), ...params.cancellation_details };
  }
  const discounts = discountsFor(ctx, { id: current.id, customer: current.customer as string }, params.discounts, current.discounts as string[]);
  next.discounts = discounts.ids;
  if (changesItems) applyItemChanges(ctx, current, params.items as Value[]);
  const saved = ctx.save(SUBSCRIPTIONS, withItems(ctx, next));
  discounts.emit();
  return saved;
}

/** List filters; `byCustomer`: the list is one customer's, which includes its test-clock subscriptions. */
function retrieveFilter({ params }: Call, byCustomer = false): ((o: StripeObject) => boolean) | undefined {
  const status = params.status as string | undefined;
  const statusFilter =
    status === 'all'
      ? undefined
      : status === 'ended'
        ? (o: StripeObject) => o.status === 'canceled' || o.status === 'incomplete_expired'
        : status
          ? (o: StripeObject) => o.status === status
          : (o: StripeObject) => o.status !== 'canceled';
  const price = str(params.price);
  // Without `test_clock` or `customer`, Stripe's list leaves out subscriptions on test clocks.
  const clockFilter = byCustomer || params.test_clock !== undefined || params.customer !== undefined ? undefined : (o: StripeObject) => !o.test_clock;
  return both(
    statusFilter,
    clockFilter,
    fieldFilter(params, ['customer', 'collection_method', 'test_clock']),
    price ? (o) => ((o.items as { data: StripeObject[] }).data ?? []).some((it) => (it.price as StripeObject).id === price) : undefined,
  );
}

const subscriptions: ResourceDef = {
  ...SUBSCRIPTIONS,
  path: '/v1/subscriptions',
  idParam: 'subscription_exposed_id',
  create: ({ ctx, params }) => createSubscription(ctx, params),
  update,
  remove: ({ ctx, params }, current) => cancelSubscription(ctx, current, params),
  filter: retrieveFilter,
};

export const subscriptionRoutes: Route[] = [
  ...crudRoutes(subscriptions),
  {
    method: 'GET',
    template: '/v1/customers/{customer}/subscriptions',
    group: SUBSCRIPTIONS.group,
    handler: (call) => {
      const customer = call.path.customer as string;
      if (!call.ctx.get(CUSTOMERS, customer)) throw noSuch('customer', customer, 'customer');
      return listPage(
        call.ctx,
        SUBSCRIPTIONS,
        call.params,
        `/v1/customers/${customer}/subscriptions`,
        both((o) => o.customer === customer, retrieveFilter(call, true)),
      );
    },
  },
];
