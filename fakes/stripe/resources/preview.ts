/**
 * The next invoice, computed and never stored: `POST /v1/invoices/create_preview` (id
 * `upcoming_in_…`), and on API versions before 2025-03-31.basil the older
 * `GET /v1/invoices/upcoming` (no id) with its `/lines`. From 2025-03-31 on, Stripe routes
 * `/v1/invoices/upcoming` to "retrieve invoice 'upcoming'", which does not exist.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, noSuch, StripeApiError } from '../errors.ts';
import { pageOfArray } from '../lists.ts';
import type { Params, Value } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { ParamSchema } from '../spec/index.ts';
import type { StripeObject } from '../store.ts';
import { addInterval, invoiceItemLine, priceAmount, subscriptionLine } from './billing.ts';
import { embeddedList, int, isHash, type Json, str } from './common.ts';
import { buildInvoice, withLines } from './invoice-model.ts';
import { CUSTOMERS, INVOICE_ITEMS, PRICES, SUBSCRIPTIONS } from './names.ts';
import { itemsOf } from './subscription-items.ts';

export const UPCOMING_REMOVED_IN = '2025-03-31';

/** True when the request's API version no longer has the upcoming-invoice endpoint. */
export function upcomingRemoved(apiVersion: string): boolean {
  return apiVersion.slice(0, 10) >= UPCOMING_REMOVED_IN;
}

const noUpcoming = (customer: string) =>
  new StripeApiError(404, 'invalid_request_error', `No upcoming invoices for customer: ${customer}`, { code: 'invoice_upcoming_none' });

interface Draft {
  price: StripeObject;
  quantity: number;
  item: StripeObject | null;
}

/** The subscription's items with the previewed changes (`subscription_details.items`) applied. */
function previewItems(ctx: Ctx, sub: StripeObject | null, changes: Value[] | undefined, param: string): Draft[] {
  const drafts: Draft[] = sub
    ? itemsOf(ctx, sub.id).map((item) => ({ price: item.price as StripeObject, quantity: (item.quantity as number) ?? 1, item }))
    : [];
  (changes ?? []).forEach((raw, i) => {
    if (!isHash(raw)) return;
    const at = `${param}[${i}]`;
    const id = str(raw.id);
    const existing = id ? drafts.find((d) => d.item?.id === id) : undefined;
    if (id && !existing) throw noSuch('subscription item', id, `${at}[id]`);
    if (existing && raw.deleted === true) {
      drafts.splice(drafts.indexOf(existing), 1);
      return;
    }
    const priceId = str(raw.price);
    const price = priceId ? ctx.get(PRICES, priceId) : existing?.price;
    if (priceId && !price) throw noSuch('price', priceId, `${at}[price]`);
    if (!price) throw invalidRequest(`Missing required param: ${at}[price].`, { code: 'parameter_missing', param: `${at}[price]` });
    const quantity = int(raw.quantity) ?? existing?.quantity ?? 1;
    if (existing) Object.assign(existing, { price, quantity });
    else drafts.push({ price, quantity, item: null });
  });
  return drafts;
}

function computePreview(ctx: Ctx, params: Params, opts: { legacy: boolean }): Json {
  const subId = str(params.subscription);
  let customerId = str(params.customer);
  const details = isHash(params.subscription_details) ? params.subscription_details : undefined;
  const legacyItems = Array.isArray(params.subscription_items) ? params.subscription_items : undefined;
  const itemChanges = (details && Array.isArray(details.items) ? details.items : undefined) ?? legacyItems;
  const extra = Array.isArray(params.invoice_items) ? params.invoice_items.filter(isHash) : [];
  if (!opts.legacy && !subId && !itemChanges && extra.length === 0 && !params.schedule && !params.schedule_details) {
    throw invalidRequest(
      'You must provide at least one of: `subscription`, `schedule`, `subscription_details.items`, `schedule_details.phases`, `invoice_items`.',
    );
  }
  let sub: StripeObject | null = null;
  if (subId) {
    sub = ctx.get(SUBSCRIPTIONS, subId) ?? null;
    if (!sub) throw noSuch('subscription', subId, 'subscription');
    if (customerId && customerId !== sub.customer)
      throw invalidRequest(`The subscription ${subId} does not belong to customer ${customerId}.`, { param: 'subscription' });
    customerId = sub.customer as string;
  }
  if (!customerId) throw invalidRequest('Missing required param: customer.', { code: 'parameter_missing', param: 'customer' });
  const customer = ctx.get(CUSTOMERS, customerId);
  if (!customer) throw noSuch('customer', customerId, 'customer');
  if (!sub && opts.legacy) {
    // The customer's next renewal: the live subscription whose period ends first.
    const live = [...ctx.col(SUBSCRIPTIONS.name).values()].filter(
      (s) => s.customer === customerId && s.status !== 'canceled' && s.status !== 'incomplete_expired',
    );
    live.sort((a, b) => periodEnd(ctx, a) - periodEnd(ctx, b));
    sub = live[0] ?? null;
  }
  if (sub && (sub.status === 'canceled' || sub.status === 'incomplete_expired')) throw noUpcoming(customerId);

  const drafts = previewItems(ctx, sub, itemChanges, opts.legacy ? 'subscription_items' : 'subscription_details[items]');
  const start = sub ? periodEnd(ctx, sub) : ctx.now;
  const id = opts.legacy ? 'upcoming' : ctx.newId('upcoming_in');
  const currency = (drafts[0]?.price.currency as string | undefined) ?? (customer.currency as string | null) ?? str(params.currency) ?? 'usd';
  const lines: Json[] = [];
  for (const d of drafts) {
    const r = d.price.recurring as { interval: string; interval_count: number };
    lines.push(
      subscriptionLine(
        ctx,
        sub?.id ?? null,
        { id: d.item?.id ?? null, price: d.price, quantity: d.quantity },
        {
          id: ctx.newId('il_tmp'),
          invoice: opts.legacy ? null : id,
          period: { start, end: addInterval(start, r.interval, r.interval_count) },
        },
      ),
    );
  }
  for (const ii of ctx.col(INVOICE_ITEMS.name).values()) {
    if (ii.customer !== customerId || ii.invoice !== null) continue;
    const owner = (ii.parent as { subscription_details?: { subscription: string } } | null)?.subscription_details?.subscription ?? null;
    if (owner === null || owner === sub?.id) lines.push(invoiceItemLine(ctx, ii, ctx.newId('il_tmp'), opts.legacy ? null : id));
  }
  for (const raw of extra) lines.push(extraLine(ctx, raw, currency, opts.legacy ? null : id));
  if (lines.length === 0) throw noUpcoming(customerId);

  let invoice = buildInvoice(ctx, {
    id,
    customer,
    currency,
    billingReason: sub ? 'upcoming' : 'manual',
    collectionMethod: (sub?.collection_method as string | undefined) ?? 'charge_automatically',
    subscription: sub,
    autoAdvance: true,
    daysUntilDue: (sub?.days_until_due as number | null | undefined) ?? null,
  });
  // A renewal invoice is dated when the current period ends and describes that period.
  const currentStart = sub ? ((itemsOf(ctx, sub.id)[0]?.current_period_start as number | undefined) ?? start) : start;
  invoice = withLines(ctx, { ...invoice, created: start, period_start: currentStart, period_end: start }, lines, false);
  invoice.automatically_finalizes_at = start + 3600;
  invoice.next_payment_attempt = invoice.collection_method === 'charge_automatically' ? start + 3600 : null;
  if (opts.legacy) {
    const { id: _drop, ...withoutId } = invoice;
    return {
      ...withoutId,
      lines: embeddedList((invoice.lines as { data: Json[] }).data, '/v1/invoices/upcoming/lines', (invoice.lines as { has_more: boolean }).has_more),
    };
  }
  return invoice;
}

function periodEnd(ctx: Ctx, sub: StripeObject): number {
  const first = itemsOf(ctx, sub.id)[0];
  return (first?.current_period_end as number | undefined) ?? (sub.trial_end as number | null) ?? ctx.now;
}

function extraLine(ctx: Ctx, raw: Record<string, Value>, currency: string, invoice: string | null): Json {
  const priceId = str(raw.price);
  const price = priceId ? ctx.get(PRICES, priceId) : undefined;
  if (priceId && !price) throw noSuch('price', priceId, 'invoice_items[price]');
  const quantity = int(raw.quantity) ?? 1;
  const amount = price ? priceAmount(ctx, price, quantity) : (int(raw.amount) ?? 0);
  const now = ctx.now;
  const pseudo: StripeObject = {
    id: ctx.newId('ii'),
    object: 'invoiceitem',
    amount,
    currency: (price?.currency as string | undefined) ?? str(raw.currency) ?? currency,
    description: str(raw.description) ?? null,
    discountable: true,
    metadata: {},
    parent: null,
    period: isHash(raw.period) ? raw.period : { end: now, start: now },
    pricing: price
      ? { price_details: { price: price.id, product: price.product }, type: 'price_details', unit_amount_decimal: price.unit_amount_decimal }
      : { type: 'price_details', unit_amount_decimal: String(amount) },
    proration: false,
    quantity,
    quantity_decimal: String(quantity),
  };
  return invoiceItemLine(ctx, pseudo, ctx.newId('il_tmp'), invoice);
}

/** The pre-basil upcoming endpoint's parameters (not in the current spec). */
const UPCOMING_SCHEMA: ParamSchema = {
  o: {
    customer: 's',
    subscription: 's',
    subscription_items: { a: { o: { id: 's', price: 's', quantity: 'i', deleted: 'b', metadata: { m: 's' } } } },
    invoice_items: { a: { o: { amount: 'i', currency: 's', description: 's', price: 's', quantity: 'i' } } },
    currency: 's',
    expand: { a: 's' },
    limit: 'i',
    starting_after: 's',
    ending_before: 's',
  },
};

function legacy(call: Call, lines: boolean): unknown {
  if (upcomingRemoved(call.ctx.apiVersion)) throw noSuch('invoice', 'upcoming');
  const { limit: _l, starting_after: _s, ending_before: _e, ...rest } = call.params;
  const invoice = computePreview(call.ctx, rest, { legacy: true });
  if (!lines) return invoice;
  return pageOfArray((invoice.lines as { data: Array<{ id: string }> }).data, call.params, '/v1/invoices/upcoming/lines', 'invoice line item');
}

export const previewRoutes: Route[] = [
  { method: 'POST', template: '/v1/invoices/create_preview', group: 'invoice', handler: ({ ctx, params }) => computePreview(ctx, params, { legacy: false }) },
  { method: 'GET', template: '/v1/invoices/upcoming', group: 'invoice', schema: UPCOMING_SCHEMA, handler: (call) => legacy(call, false) },
  { method: 'GET', template: '/v1/invoices/upcoming/lines', group: 'invoice', schema: UPCOMING_SCHEMA, handler: (call) => legacy(call, true) },
];
