/**
 * The arithmetic of billing shared by subscriptions, invoices, previews and the generator:
 * billing periods, what a price costs for a quantity, invoice lines and totals.
 */
import type { Ctx } from '../context.ts';
import type { StripeObject } from '../store.ts';
import type { Json } from './common.ts';
import { PRODUCTS } from './names.ts';

/** `ts` moved by `count` intervals, calendar-wise in UTC (Jan 31 + 1 month = Feb 28/29). */
export function addInterval(ts: number, interval: string, count: number): number {
  if (interval === 'day') return ts + count * 86_400;
  if (interval === 'week') return ts + count * 7 * 86_400;
  const d = new Date(ts * 1000);
  const months = interval === 'year' ? 12 * count : count;
  const day = d.getUTCDate();
  const target = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + months, 1, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()));
  const lastDay = new Date(Date.UTC(target.getUTCFullYear(), target.getUTCMonth() + 1, 0)).getUTCDate();
  target.setUTCDate(Math.min(day, lastDay));
  return Math.floor(target.getTime() / 1000);
}

interface Tier {
  flat_amount: number | null;
  unit_amount: number | null;
  up_to: number | null;
}

/** What `quantity` of a price costs, in the smallest currency unit. */
export function priceAmount(ctx: Ctx, price: StripeObject, quantity: number): number {
  let q = quantity;
  const transform = price.transform_quantity as { divide_by: number; round: string } | null;
  if (transform) q = transform.round === 'up' ? Math.ceil(q / transform.divide_by) : Math.floor(q / transform.divide_by);
  if (price.billing_scheme !== 'tiered') return Math.round(Number(price.unit_amount_decimal ?? price.unit_amount ?? 0) * q);
  const tiers = (ctx.account.hidden.get(price.id)?.tiers as Tier[] | undefined) ?? [];
  if (price.tiers_mode === 'volume') {
    const tier = tiers.find((t) => t.up_to === null || q <= t.up_to) ?? tiers[tiers.length - 1];
    return tier ? (tier.flat_amount ?? 0) + (tier.unit_amount ?? 0) * q : 0;
  }
  let total = 0;
  let floor = 0;
  for (const t of tiers) {
    if (q <= floor) break;
    const top = t.up_to === null ? q : Math.min(q, t.up_to);
    total += (t.flat_amount ?? 0) + (t.unit_amount ?? 0) * (top - floor);
    floor = top;
  }
  return total;
}

const SYMBOLS: Record<string, string> = { usd: '$', eur: '€', gbp: '£', cad: 'CA$', aud: 'A$', jpy: '¥' };

export function formatMoney(amount: number, currency: string): string {
  const symbol = SYMBOLS[currency];
  const value = currency === 'jpy' ? String(amount) : (amount / 100).toFixed(2);
  return symbol ? `${symbol}${value}` : `${value} ${currency.toUpperCase()}`;
}

function productName(ctx: Ctx, price: StripeObject): string {
  return (ctx.get(PRODUCTS, price.product as string)?.name as string | undefined) ?? String(price.product);
}

export interface LineOptions {
  id: string;
  invoice: string | null;
  period: { start: number; end: number };
  trial?: boolean;
}

/** What a line bills: a subscription item, or (previews of new subscriptions) one that does not exist yet. */
export interface BilledItem {
  id: string | null;
  price: StripeObject;
  quantity: number;
}

/** The invoice line billing one subscription item for one period. */
export function subscriptionLine(ctx: Ctx, subscription: string | null, item: BilledItem, o: LineOptions): Json {
  const price = item.price;
  const quantity = item.quantity;
  const amount = o.trial ? 0 : priceAmount(ctx, price, quantity);
  const recurring = price.recurring as { interval: string; interval_count: number } | null;
  const every = recurring ? (recurring.interval_count === 1 ? recurring.interval : `every ${recurring.interval_count} ${recurring.interval}s`) : '';
  const unit = formatMoney(Number(price.unit_amount ?? 0), price.currency as string);
  const name = productName(ctx, price);
  return {
    id: o.id,
    object: 'line_item',
    amount,
    currency: price.currency,
    description: o.trial ? `Trial period for ${name}` : `${quantity} × ${name} (at ${unit} / ${every})`,
    discount_amounts: [],
    discountable: true,
    discounts: [],
    invoice: o.invoice,
    livemode: ctx.livemode,
    metadata: {},
    parent: {
      invoice_item_details: null,
      subscription_item_details: {
        invoice_item: null,
        proration: false,
        proration_details: { credited_items: null },
        subscription,
        subscription_item: item.id,
      },
      type: 'subscription_item_details',
    },
    period: { end: o.period.end, start: o.period.start },
    pretax_credit_amounts: [],
    pricing: { price_details: { price: price.id, product: price.product }, type: 'price_details', unit_amount_decimal: price.unit_amount_decimal },
    quantity,
    quantity_decimal: String(quantity),
    subscription,
    subtotal: amount,
    taxes: [],
  };
}

/** The invoice line of a one-off invoice item. */
export function invoiceItemLine(ctx: Ctx, ii: StripeObject, id: string, invoice: string | null): Json {
  const parent = ii.parent as { subscription_details?: { subscription: string } } | null;
  return {
    id,
    object: 'line_item',
    amount: ii.amount,
    currency: ii.currency,
    description: ii.description,
    discount_amounts: [],
    discountable: ii.discountable,
    discounts: [],
    invoice,
    livemode: ctx.livemode,
    metadata: ii.metadata,
    parent: {
      invoice_item_details: {
        invoice_item: ii.id,
        proration: ii.proration,
        proration_details: { credited_items: null },
        subscription: parent?.subscription_details?.subscription ?? null,
      },
      subscription_item_details: null,
      type: 'invoice_item_details',
    },
    period: ii.period,
    pretax_credit_amounts: [],
    pricing: ii.pricing,
    quantity: ii.quantity,
    quantity_decimal: ii.quantity_decimal,
    subscription: parent?.subscription_details?.subscription ?? null,
    subtotal: ii.amount,
    taxes: [],
  };
}

export function sumAmounts(lines: Json[]): number {
  return lines.reduce((s, l) => s + (l.amount as number), 0);
}

/** The period a subscription item is in at `now`, stepping from its current period. */
export function nextPeriod(start: number, price: StripeObject): { start: number; end: number } {
  const r = price.recurring as { interval: string; interval_count: number };
  return { start, end: addInterval(start, r.interval, r.interval_count) };
}
