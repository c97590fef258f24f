/**
 * Invoice items: pending charges for a customer's next invoice, or lines added to a draft.
 * Changing one that sits on a draft changes the draft's lines and totals too.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import type { Params } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { int, isHash, type Json, mergeMetadata, str } from './common.ts';
import { invoiceItemLine, priceAmount } from './billing.ts';
import { customerTime, testClockId } from './clock-time.ts';
import { crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { fixCurrency } from './customers.ts';
import { invoiceLines, withLines } from './invoice-model.ts';
import { CUSTOMERS, INVOICE_ITEMS, INVOICES, PRICES, SUBSCRIPTIONS } from './names.ts';
import { createPrice } from './prices.ts';

interface Pricing {
  amount: number;
  currency: string;
  quantity: number;
  pricing: Json;
}

/** Amount and `pricing` from a price, inline price_data, or a bare amount. */
function pricingOf(ctx: Ctx, p: Params, current?: StripeObject): Pricing {
  const quantity = int(p.quantity) ?? (current?.quantity as number | undefined) ?? 1;
  const priceId = isHash(p.pricing) ? str(p.pricing.price) : undefined;
  let price: StripeObject | undefined;
  if (priceId) {
    price = ctx.get(PRICES, priceId);
    if (!price) throw noSuch('price', priceId, 'pricing[price]');
  } else if (isHash(p.price_data)) {
    price = createPrice(ctx, { ...p.price_data, active: false }, 'price_data');
  }
  if (price) {
    return {
      amount: priceAmount(ctx, price, quantity),
      currency: price.currency as string,
      quantity,
      pricing: { price_details: { price: price.id, product: price.product }, type: 'price_details', unit_amount_decimal: price.unit_amount_decimal },
    };
  }
  const unitDecimal = str(p.unit_amount_decimal);
  if (unitDecimal !== undefined) {
    const currency = str(p.currency) ?? (current?.currency as string | undefined);
    if (!currency) throw missingParam('currency');
    return {
      amount: Math.round(Number(unitDecimal) * quantity),
      currency: currency.toLowerCase(),
      quantity,
      pricing: { type: 'price_details', unit_amount_decimal: unitDecimal },
    };
  }
  const amount = int(p.amount) ?? (current?.amount as number | undefined);
  if (amount === undefined) throw missingParam('amount');
  const currency = str(p.currency)?.toLowerCase() ?? (current?.currency as string | undefined);
  if (!currency) throw missingParam('currency');
  return {
    amount,
    currency,
    quantity: current && p.amount === undefined ? quantity : 1,
    pricing: { type: 'price_details', unit_amount_decimal: String(amount) },
  };
}

function draftFor(ctx: Ctx, invoiceId: string, customer: string): StripeObject {
  const invoice = ctx.get(INVOICES, invoiceId);
  if (!invoice) throw noSuch('invoice', invoiceId, 'invoice');
  if (invoice.status !== 'draft')
    throw invalidRequest(`You can only add invoice items to draft invoices; invoice ${invoiceId} is ${String(invoice.status)}.`, { param: 'invoice' });
  if (invoice.customer !== customer) throw invalidRequest('The invoice belongs to another customer.', { param: 'invoice' });
  return invoice;
}

/** Rewrites the draft invoice's line for this item (removing it when `item` is deleted). */
function syncDraft(ctx: Ctx, invoiceId: string, item: StripeObject, deleted = false): void {
  const invoice = ctx.find(INVOICES, invoiceId);
  const lines = invoiceLines(ctx, invoiceId).filter((l) => {
    const parent = l.parent as { invoice_item_details?: { invoice_item: string } | null };
    return parent.invoice_item_details?.invoice_item !== item.id;
  });
  const existing = invoiceLines(ctx, invoiceId).find(
    (l) => (l.parent as { invoice_item_details?: { invoice_item: string } | null }).invoice_item_details?.invoice_item === item.id,
  );
  if (!deleted) lines.push(invoiceItemLine(ctx, item, (existing?.id as string | undefined) ?? ctx.newId('il'), invoiceId));
  ctx.save(INVOICES, withLines(ctx, invoice, lines));
}

export function createInvoiceItem(ctx: Ctx, p: Params): StripeObject {
  const customer = str(p.customer);
  if (!customer) throw missingParam('customer');
  if (!ctx.get(CUSTOMERS, customer)) throw noSuch('customer', customer, 'customer');
  const subscription = str(p.subscription);
  if (subscription && !ctx.get(SUBSCRIPTIONS, subscription)) throw noSuch('subscription', subscription, 'subscription');
  const invoiceId = str(p.invoice);
  if (invoiceId) draftFor(ctx, invoiceId, customer);
  const priced = pricingOf(ctx, p);
  fixCurrency(ctx, customer, priced.currency);
  const now = ctx.now;
  const period = isHash(p.period) ? { end: p.period.end, start: p.period.start } : { end: now, start: now };
  const item: StripeObject = {
    id: ctx.newId(INVOICE_ITEMS.prefix),
    object: 'invoiceitem',
    amount: priced.amount,
    currency: priced.currency,
    customer,
    customer_account: null,
    date: now,
    description: str(p.description) ?? null,
    discountable: typeof p.discountable === 'boolean' ? p.discountable : true,
    discounts: [],
    invoice: invoiceId ?? null,
    livemode: ctx.livemode,
    metadata: mergeMetadata({}, p.metadata),
    net_amount: priced.amount,
    parent: subscription ? { subscription_details: { subscription }, type: 'subscription_details' } : null,
    period,
    pricing: priced.pricing,
    proration: false,
    quantity: priced.quantity,
    quantity_decimal: String(priced.quantity),
    tax_rates: [],
    test_clock: testClockId(ctx, customer),
  };
  ctx.insert(INVOICE_ITEMS, item);
  if (invoiceId) syncDraft(ctx, invoiceId, item);
  return item;
}

function editable(ctx: Ctx, item: StripeObject): void {
  if (item.invoice === null) return;
  const invoice = ctx.get(INVOICES, item.invoice as string);
  if (invoice && invoice.status !== 'draft') {
    throw invalidRequest(`Invoice item ${item.id} is on invoice ${invoice.id}, which is no longer a draft, so the item cannot be changed.`, {
      code: 'invoice_not_editable',
    });
  }
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  editable(ctx, current);
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  if (['amount', 'pricing', 'price_data', 'quantity', 'unit_amount_decimal'].some((k) => params[k] !== undefined)) {
    const priced = pricingOf(ctx, { currency: current.currency as string, ...params }, current);
    Object.assign(next, {
      amount: priced.amount,
      net_amount: priced.amount,
      quantity: priced.quantity,
      quantity_decimal: String(priced.quantity),
      pricing: priced.pricing,
    });
  }
  if (params.description !== undefined) next.description = params.description === '' ? null : params.description;
  if (typeof params.discountable === 'boolean') next.discountable = params.discountable;
  if (isHash(params.period)) next.period = { end: params.period.end, start: params.period.start };
  const saved = ctx.save(INVOICE_ITEMS, next);
  if (saved.invoice !== null && saved !== current) syncDraft(ctx, saved.invoice as string, saved);
  return saved;
}

function remove({ ctx }: Call, current: StripeObject): unknown {
  editable(ctx, current);
  const answer = ctx.destroy(INVOICE_ITEMS, current);
  if (current.invoice !== null) syncDraft(ctx, current.invoice as string, current, true);
  return answer;
}

const invoiceItems: ResourceDef = {
  ...INVOICE_ITEMS,
  path: '/v1/invoiceitems',
  idParam: 'invoiceitem',
  create: ({ ctx, params }) => createInvoiceItem(customerTime(ctx, str(params.customer)), params),
  update,
  remove,
  filter: ({ params }) => {
    const base = fieldFilter(params, ['customer', 'invoice']);
    if (params.pending !== true) return base;
    return (o) => o.invoice === null && (!base || base(o));
  },
};

export const invoiceItemRoutes: Route[] = crudRoutes(invoiceItems);
