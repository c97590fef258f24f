/**
 * A seeded account of any size: products with prices, coupons, customers with cards,
 * subscriptions billed every period since they started (invoices with lines, payment intents,
 * charges, balance transactions, invoice payments), one-off payments with some declines,
 * refunds and disputes, pending invoice items, checkout sessions and weekly payouts. The same
 * seed into an account with the same id gives the same objects. Bulk objects are built in
 * their final state and stored directly (no lifecycle replay), which keeps 100k objects to a
 * few seconds; events are only emitted when asked for.
 */
import type { AccountState } from './account.ts';
import type { Clock } from './clock.ts';
import { Ctx, type ResourceNames } from './context.ts';
import { couponId, seededId } from './ids.ts';
import { hash4, hashString } from '../shared/hash.ts';
import { addInterval, formatMoney, subscriptionLine } from './resources/billing.ts';
import { CARD_BRANDS, cardOfBrand } from './resources/cards.ts';
import { buildCharge, cardFee, createBalanceTransaction } from './resources/charges.ts';
import { completeSession, createSession } from './resources/checkout.ts';
import { EMPTY_ADDRESS, type Json } from './resources/common.ts';
import { couponTemplate } from './resources/coupons.ts';
import { newCustomer } from './resources/customers.ts';
import { DISPUTE_REASONS, openDispute } from './resources/disputes.ts';
import { createInvoiceItem } from './resources/invoice-items.ts';
import { buildInvoice, finalizedFields, invoicePayment, withLines } from './resources/invoice-model.ts';
import {
  CHARGES,
  CHECKOUT_SESSIONS,
  COUPONS,
  CUSTOMERS,
  INVOICE_PAYMENTS,
  INVOICES,
  PAYMENT_INTENTS,
  PAYMENT_METHODS,
  PAYOUTS,
  PRICES,
  PRODUCTS,
  SUBSCRIPTION_ITEMS,
  SUBSCRIPTIONS,
} from './resources/names.ts';
import { buildIntent } from './resources/payment-intents.ts';
import { newCardPaymentMethod } from './resources/payment-methods.ts';
import { buildPayout } from './resources/payouts.ts';
import { planOf, priceTemplate } from './resources/prices.ts';
import { newProduct } from './resources/products.ts';
import { refundCharge } from './resources/refunds.ts';
import { buildItem, withItems } from './resources/subscription-items.ts';
import { subscriptionTemplate } from './resources/subscriptions.ts';
import type { StripeObject } from './store.ts';

export interface GenerateInput {
  seed: number;
  customers: number;
  /** Default: one per 200 customers, 3 to 200. */
  products?: number;
  /** Default: one per 500 customers, at least 2. */
  coupons?: number;
  /** Share of customers (with a card) that subscribe; default 0.6. */
  subscriptionRate?: number;
  /** One-off card payments per customer, on average; default 1. */
  paymentsPerCustomer?: number;
  /** Share of one-off payments refunded (some partially); default 0.05. */
  refundRate?: number;
  /** Share of one-off payments disputed; default 0.01. */
  disputeRate?: number;
  /** Share of customers with a pending invoice item; default 0.05. */
  pendingItemRate?: number;
  /** Default: one per 10 customers. */
  checkoutSessions?: number;
  /** How far back `created` times go; default 365 days. */
  days?: number;
  /** Emit the events these objects would have caused (dated when they happened); default false. */
  events?: boolean;
}

/** How many objects of each collection the run added. */
export type GenerateSummary = Record<string, number>;

const DAY = 86_400;
const FIRST = [
  'Ada',
  'Grace',
  'Alan',
  'Katherine',
  'Edsger',
  'Barbara',
  'Donald',
  'Frances',
  'John',
  'Margaret',
  'Tim',
  'Radia',
  'Ken',
  'Lynn',
  'Linus',
  'Hedy',
];
const LAST = [
  'Lovelace',
  'Hopper',
  'Turing',
  'Johnson',
  'Dijkstra',
  'Liskov',
  'Knuth',
  'Allen',
  'McCarthy',
  'Hamilton',
  'Berners-Lee',
  'Perlman',
  'Thompson',
  'Conway',
  'Torvalds',
  'Lamarr',
];
const WORDS = [
  'Atlas',
  'Birch',
  'Cobalt',
  'Delta',
  'Ember',
  'Fjord',
  'Granite',
  'Harbor',
  'Indigo',
  'Juniper',
  'Kestrel',
  'Lumen',
  'Meadow',
  'Nimbus',
  'Orchid',
  'Pioneer',
];
const TIERS = ['Starter', 'Basic', 'Team', 'Pro', 'Business', 'Enterprise'];
const MONTHLY = [500, 900, 1500, 2900, 4900, 9900, 19900];
const CITIES: Array<[string, string, string]> = [
  ['San Francisco', 'CA', '94103'],
  ['New York', 'NY', '10001'],
  ['Austin', 'TX', '78701'],
  ['Seattle', 'WA', '98101'],
  ['Chicago', 'IL', '60601'],
];

interface Product {
  product: StripeObject;
  monthly: StripeObject;
  yearly: StripeObject;
  oneTime: StripeObject | null;
}

class Generator {
  private t: number;
  private readonly now: number;
  private readonly ctx: Ctx;
  private readonly counters = new Map<string, number>();
  private readonly payoutWeeks = new Map<number, number>();
  private readonly salt: number;

  constructor(
    account: AccountState,
    clock: Clock,
    private readonly input: GenerateInput,
  ) {
    this.now = clock.now();
    this.t = this.now;
    this.salt = Math.imul(account.generations + 1, 0x2545f491);
    const newId = (prefix: string) => {
      const n = this.counters.get(prefix) ?? 0;
      this.counters.set(prefix, n + 1);
      return seededId(prefix, account.tag, input.seed, hashString(prefix) ^ this.salt, n);
    };
    this.ctx = new Ctx(account, clock, { id: null, idempotency_key: null }, account.apiVersion, input.events === true, newId, () => this.t);
  }

  /** A number in [0, 1) for (what, index, k): the generator's only randomness. */
  private r(what: number, i: number, k = 0): number {
    return hash4(this.input.seed ^ this.salt, what, i, k) / 4294967296;
  }

  private pick<T>(list: readonly T[], what: number, i: number, k = 0): T {
    return list[Math.floor(this.r(what, i, k) * list.length)] as T;
  }

  private at(t: number): Ctx {
    this.t = Math.min(Math.floor(t), this.now);
    return this.ctx;
  }

  private put(res: ResourceNames, obj: StripeObject, eventType: string | null = res.events && `${res.events}.created`): StripeObject {
    return this.ctx.insert(res, obj, eventType);
  }

  run(): void {
    const n = Math.max(0, Math.floor(this.input.customers));
    const from = this.now - (this.input.days ?? 365) * DAY;
    const products = this.products(from);
    this.coupons(from, n);
    const span = this.now - from;
    for (let i = 0; i < n; i++) this.customer(i, from + Math.floor(((i + this.r(1, i)) / Math.max(1, n)) * span * 0.9), products);
    this.checkoutSessions(n, from, products);
    this.payouts(from);
  }

  private products(from: number): Product[] {
    const count = this.input.products ?? Math.min(200, Math.max(3, Math.ceil(this.input.customers / 200)));
    const out: Product[] = [];
    for (let p = 0; p < count; p++) {
      const ctx = this.at(from + p * 60);
      const name = `${WORDS[p % WORDS.length]} ${TIERS[Math.floor(p / WORDS.length) % TIERS.length]}${p >= WORDS.length * TIERS.length ? ` ${p}` : ''}`;
      const product = newProduct(ctx, ctx.newId(PRODUCTS.prefix), name);
      product.description = `The ${name} plan`;
      product.metadata = { tier: TIERS[p % TIERS.length] as string };
      const monthlyAmount = this.pick(MONTHLY, 2, p);
      const price = (amount: number, recurring: { interval: string } | null, nickname: string) =>
        priceTemplate(ctx, {
          id: ctx.newId(PRICES.prefix),
          currency: 'usd',
          product: product.id,
          unitAmount: amount,
          recurring: recurring ? { interval: recurring.interval, interval_count: 1, meter: null, usage_type: 'licensed' } : null,
          nickname,
          lookupKey: `${name.toLowerCase().replace(/\s+/g, '_')}_${nickname.toLowerCase().replace(/\s+/g, '_')}`,
        });
      const monthly = price(monthlyAmount, { interval: 'month' }, 'Monthly');
      const yearly = price(monthlyAmount * 10, { interval: 'year' }, 'Yearly');
      const oneTime = p % 2 === 0 ? price(monthlyAmount * 3, null, 'Setup fee') : null;
      this.put(PRODUCTS, { ...product, default_price: monthly.id });
      for (const pr of [monthly, yearly, oneTime]) {
        if (!pr) continue;
        this.put(PRICES, pr);
        if (pr.recurring && this.input.events) ctx.emit('plan.created', planOf(ctx, pr));
      }
      out.push({ product, monthly, yearly, oneTime });
    }
    return out;
  }

  private coupons(from: number, customers: number): void {
    const count = this.input.coupons ?? Math.max(2, Math.ceil(customers / 500));
    for (let c = 0; c < count; c++) {
      const ctx = this.at(from + 3600 + c * 60);
      const percent = this.pick([10, 15, 20, 25, 50], 4, c);
      const duration = this.pick(['once', 'repeating', 'forever'], 5, c);
      this.put(
        COUPONS,
        couponTemplate(ctx, {
          id: couponId(ctx.newId('x').slice(-8)),
          amountOff: null,
          percentOff: percent,
          currency: null,
          duration,
          months: duration === 'repeating' ? 3 : null,
          name: `${percent}% off`,
          timesRedeemed: Math.floor(this.r(6, c) * 40),
        }),
      );
    }
  }

  private customer(i: number, created: number, products: Product[]): void {
    const ctx = this.at(created);
    const first = this.pick(FIRST, 10, i);
    const last = this.pick(LAST, 11, i);
    const customer = newCustomer(ctx, ctx.newId(CUSTOMERS.prefix));
    customer.name = `${first} ${last}`;
    customer.email = `${first}.${last}.${i + 1}@example.com`.toLowerCase();
    customer.metadata = { customer_no: String(i + 1) };
    if (this.r(12, i) < 0.5) {
      const [city, state, zip] = this.pick(CITIES, 13, i);
      customer.address = { ...EMPTY_ADDRESS, city, country: 'US', line1: `${1 + Math.floor(this.r(14, i) * 999)} Market Street`, postal_code: zip, state };
    }
    if (this.r(15, i) < 0.3) customer.phone = `+1555${String(Math.floor(this.r(16, i) * 1e7)).padStart(7, '0')}`;
    let pm: StripeObject | null = null;
    if (this.r(17, i) < 0.9) {
      const card = cardOfBrand(this.pick(CARD_BRANDS, 18, i));
      pm = newCardPaymentMethod(ctx, ctx.newId(PAYMENT_METHODS.prefix), card, new Date(this.now * 1000).getUTCFullYear() + 1 + Math.floor(this.r(19, i) * 4));
      pm.customer = customer.id;
      pm.billing_details = { ...(pm.billing_details as Json), email: customer.email, name: customer.name };
      customer.invoice_settings = { ...(customer.invoice_settings as Json), default_payment_method: pm.id };
    }
    const state = { customer, sequence: 1, currency: null as string | null };
    if (pm && this.r(20, i) < (this.input.subscriptionRate ?? 0.6)) this.subscription(i, state, pm, products);
    customer.next_invoice_sequence = state.sequence;
    customer.currency = state.currency;
    this.at(created);
    this.put(CUSTOMERS, customer);
    if (pm) this.put(PAYMENT_METHODS, pm, 'payment_method.attached');
    if (pm) this.payments(i, customer, pm, products);
    if (this.r(21, i) < (this.input.pendingItemRate ?? 0.05)) {
      this.at(created + (this.now - created) * this.r(22, i));
      createInvoiceItem(this.ctx, {
        customer: customer.id,
        amount: 500 + Math.floor(this.r(23, i) * 50) * 100,
        currency: 'usd',
        description: 'Onboarding session',
      });
    }
  }

  /** A subscription with every period's invoice, paid, from its start until now (or its cancellation). */
  private subscription(i: number, state: { customer: StripeObject; sequence: number; currency: string | null }, pm: StripeObject, products: Product[]): void {
    const customer = state.customer;
    const product = this.pick(products, 30, i);
    const yearly = this.r(31, i) < 0.2;
    const price = yearly ? product.yearly : product.monthly;
    const second = this.r(32, i) < 0.15 ? this.pick(products, 33, i) : null;
    const prices = [price, ...(second && second !== product ? [yearly ? second.yearly : second.monthly] : [])];
    const fate = this.r(34, i);
    const trialing = fate >= 0.13 && fate < 0.17;
    let start = Math.min((customer.created as number) + Math.floor(this.r(35, i) * 3 * DAY), this.now - 3600);
    if (trialing) start = this.now - Math.floor(this.r(36, i) * 10 * DAY) - 3600;
    const canceledAt = fate < 0.1 ? start + Math.floor((this.now - start) * (0.2 + 0.8 * this.r(37, i))) : null;
    const pastDue = fate >= 0.1 && fate < 0.13;
    const trialEnd = trialing ? start + 14 * DAY : null;
    const r = price.recurring as { interval: string; interval_count: number };
    const starts: number[] = [];
    if (trialEnd !== null) starts.push(start);
    else for (let ps = start; ps <= Math.min(this.now, canceledAt ?? this.now); ps = addInterval(ps, r.interval, r.interval_count)) starts.push(ps);
    const lastStart = starts[starts.length - 1] as number;
    const period = { start: lastStart, end: trialEnd ?? addInterval(lastStart, r.interval, r.interval_count) };

    const ctx = this.at(start);
    const id = ctx.newId(SUBSCRIPTIONS.prefix);
    const items = prices.map((p, k) => buildItem(ctx, id, p, k === 0 && this.r(38, i) < 0.2 ? 2 + Math.floor(this.r(39, i) * 4) : 1, {}, period));
    for (const item of items) this.ctx.col(SUBSCRIPTION_ITEMS.name).insert(item);
    let sub = subscriptionTemplate(ctx, {
      id,
      customer: customer.id,
      currency: 'usd',
      start,
      anchor: trialEnd ?? start,
      trialEnd,
      status: canceledAt !== null ? 'canceled' : trialing ? 'trialing' : pastDue ? 'past_due' : 'active',
      metadata: { plan: String(product.product.name) },
    });
    if (canceledAt !== null) {
      sub = {
        ...sub,
        canceled_at: canceledAt,
        ended_at: canceledAt,
        cancellation_details: {
          comment: null,
          feedback: this.pick(['too_expensive', 'unused', 'switched_service', null], 40, i),
          feedback_option: null,
          reason: 'cancellation_requested',
        },
      };
    }
    sub = withItems(ctx, sub, items);
    state.currency = 'usd';
    let latest: string | null = null;
    starts.forEach((ps, k) => {
      const pe = trialEnd ?? addInterval(ps, r.interval, r.interval_count);
      const unpaid = pastDue && k === starts.length - 1;
      latest = this.invoice(state, sub, items, pm, { start: ps, end: pe }, k === 0 ? 'subscription_create' : 'subscription_cycle', trialing, unpaid);
    });
    this.at(start);
    this.put(SUBSCRIPTIONS, { ...sub, latest_invoice: latest });
  }

  private invoice(
    state: { customer: StripeObject; sequence: number },
    sub: StripeObject,
    items: StripeObject[],
    pm: StripeObject,
    period: { start: number; end: number },
    reason: string,
    trial: boolean,
    unpaid: boolean,
  ): string {
    const ctx = this.at(period.start);
    let inv = buildInvoice(ctx, {
      customer: state.customer,
      currency: 'usd',
      billingReason: reason,
      collectionMethod: 'charge_automatically',
      subscription: sub,
      autoAdvance: true,
    });
    const lines = items.map((item) =>
      subscriptionLine(
        ctx,
        sub.id,
        { id: item.id, price: item.price as StripeObject, quantity: item.quantity as number },
        { id: ctx.newId('il'), invoice: inv.id, period, trial },
      ),
    );
    inv = withLines(ctx, inv, lines);
    const number = `${String(state.customer.invoice_prefix)}-${String(state.sequence++).padStart(4, '0')}`;
    inv = { ...inv, ...finalizedFields(ctx, inv, number), period_start: period.start, period_end: period.start };
    const amount = inv.amount_due as number;
    if (unpaid) {
      inv = { ...inv, attempted: true, attempt_count: 1, next_payment_attempt: Math.min(this.now + 3 * DAY, period.start + 4 * DAY) };
      this.put(INVOICES, inv);
      return inv.id;
    }
    const paidAt = period.start + (amount > 0 ? 3600 : 0);
    if (amount > 0) {
      const pi = this.payment(
        amount,
        state.customer.id as string,
        pm,
        reason === 'subscription_create' ? 'Subscription creation' : 'Subscription cycle',
        paidAt,
        false,
      );
      this.at(paidAt);
      this.put(INVOICE_PAYMENTS, invoicePayment(this.ctx, inv, pi, amount), 'invoice_payment.paid');
    }
    inv = {
      ...inv,
      amount_paid: amount,
      amount_remaining: 0,
      attempted: amount > 0,
      attempt_count: amount > 0 ? 1 : 0,
      auto_advance: false,
      next_payment_attempt: null,
      status: 'paid',
      status_transitions: { ...(inv.status_transitions as Json), paid_at: paidAt },
    };
    this.at(period.start);
    this.put(INVOICES, inv);
    if (this.input.events) {
      this.ctx.emit('invoice.finalized', inv);
      this.at(paidAt);
      this.ctx.emit('invoice.paid', inv);
      if (amount > 0) this.ctx.emit('invoice.payment_succeeded', inv);
    }
    return inv.id;
  }

  /** A succeeded (or declined) card payment: intent, charge, balance transaction. */
  private payment(amount: number, customer: string, pm: StripeObject, description: string, at: number, declined: boolean): StripeObject {
    const ctx = this.at(at);
    const pi = buildIntent(ctx, { amount, currency: 'usd', customer, description });
    const charge = buildCharge(ctx, {
      amount,
      currency: 'usd',
      customer,
      paymentIntent: pi.id,
      paymentMethod: pm,
      description,
      receiptEmail: null,
      capture: true,
      ...(declined ? { decline: { code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' } } : {}),
    });
    let stored = charge;
    if (!declined) {
      const txn = createBalanceTransaction(ctx, { amount, currency: 'usd', type: 'charge', source: charge.id, description, fee: cardFee(amount) });
      stored = { ...charge, balance_transaction: txn.id };
      const week = Math.floor((txn.available_on as number) / (7 * DAY));
      this.payoutWeeks.set(week, (this.payoutWeeks.get(week) ?? 0) + (txn.net as number));
    }
    this.put(CHARGES, stored, declined ? 'charge.failed' : 'charge.succeeded');
    const final: StripeObject = declined
      ? {
          ...pi,
          latest_charge: charge.id,
          last_payment_error: {
            charge: charge.id,
            code: 'card_declined',
            decline_code: 'generic_decline',
            doc_url: 'https://stripe.com/docs/error-codes/card-declined',
            message: 'Your card was declined.',
            payment_method: pm,
            type: 'card_error',
          },
        }
      : { ...pi, amount_received: amount, latest_charge: charge.id, payment_method: pm.id, status: 'succeeded' };
    this.put(PAYMENT_INTENTS, final, declined ? 'payment_intent.payment_failed' : 'payment_intent.succeeded');
    return final;
  }

  private payments(i: number, customer: StripeObject, pm: StripeObject, products: Product[]): void {
    const mean = this.input.paymentsPerCustomer ?? 1;
    const count = Math.floor(this.r(50, i) * 2 * mean + 0.5);
    const created = customer.created as number;
    for (let k = 0; k < count; k++) {
      const at = created + Math.floor((this.now - created) * this.r(51, i, k));
      const product = this.pick(products, 52, i, k);
      const amount = product.oneTime ? (product.oneTime.unit_amount as number) : 1000 + Math.floor(this.r(53, i, k) * 190) * 100;
      const declined = this.r(54, i, k) < 0.03;
      const pi = this.payment(
        amount,
        customer.id,
        pm,
        `Order ${String(customer.metadata && (customer.metadata as Json).customer_no)}-${k + 1}: ${String(product.product.name)} (${formatMoney(amount, 'usd')})`,
        at,
        declined,
      );
      if (declined) continue;
      const chargeId = pi.latest_charge as string;
      const later = at + Math.floor((this.now - at) * this.r(55, i, k));
      if (this.r(56, i, k) < (this.input.refundRate ?? 0.05)) {
        const charge = this.ctx.col(CHARGES.name).get(chargeId) as StripeObject;
        this.at(later);
        const partial = this.r(57, i, k) < 0.3;
        refundCharge(this.ctx, { charge, ...(partial ? { amount: Math.floor(amount / 2) } : {}), reason: 'requested_by_customer' });
      } else if (this.r(58, i, k) < (this.input.disputeRate ?? 0.01)) {
        const charge = this.ctx.col(CHARGES.name).get(chargeId) as StripeObject;
        this.at(later);
        const settled = later < this.now - 30 * DAY;
        openDispute(this.ctx, charge, {
          reason: this.pick(DISPUTE_REASONS, 59, i, k),
          status: settled ? this.pick(['won', 'lost'], 60, i, k) : 'needs_response',
        });
      }
    }
  }

  private checkoutSessions(customers: number, from: number, products: Product[]): void {
    const count = this.input.checkoutSessions ?? Math.ceil(customers / 10);
    const span = this.now - from;
    const sellable = products.filter((p) => p.oneTime);
    if (sellable.length === 0) return;
    for (let s = 0; s < count; s++) {
      const at = from + Math.floor(span * this.r(70, s));
      const product = this.pick(sellable, 71, s);
      const ctx = this.at(at);
      const session = createSession(ctx, {
        mode: 'payment',
        line_items: [{ price: (product.oneTime as StripeObject).id, quantity: 1 + Math.floor(this.r(72, s) * 3) }],
        success_url: 'https://example.com/checkout/success?session_id={CHECKOUT_SESSION_ID}',
        cancel_url: 'https://example.com/checkout/cancel',
        customer_email: `guest.${s + 1}@example.com`,
        metadata: { source: 'web' },
      });
      const fate = this.r(73, s);
      if (at > this.now - DAY && fate < 0.5) continue;
      if (fate < 0.2) {
        this.ctx.save(CHECKOUT_SESSIONS, { ...session, status: 'expired', url: null }, 'checkout.session.expired');
        continue;
      }
      this.at(at + 300);
      completeSession(this.ctx, session, {
        payment_method: `pm_card_${this.pick(['visa', 'mastercard', 'amex'], 74, s)}`,
        email: `guest.${s + 1}@example.com`,
      });
    }
  }

  /** Weekly automatic payouts of what settled that week. */
  private payouts(from: number): void {
    const weeks = [...this.payoutWeeks.keys()].sort((a, b) => a - b);
    for (const week of weeks) {
      const amount = this.payoutWeeks.get(week) ?? 0;
      const at = (week + 1) * 7 * DAY;
      if (amount <= 0 || at > this.now || at < from) continue;
      const ctx = this.at(at);
      const arrival = at + 2 * DAY;
      const payout = buildPayout(ctx, { amount, currency: 'usd', automatic: true, status: arrival <= this.now ? 'paid' : 'in_transit', arrival });
      const txn = createBalanceTransaction(ctx, {
        amount: -amount,
        currency: 'usd',
        type: 'payout',
        source: payout.id,
        description: 'STRIPE PAYOUT',
        settleDays: 0,
      });
      this.put(PAYOUTS, { ...payout, balance_transaction: txn.id }, payout.status === 'paid' ? 'payout.paid' : 'payout.created');
    }
  }
}

const COUNTED = [
  'products',
  'prices',
  'coupons',
  'customers',
  'payment_methods',
  'subscriptions',
  'subscription_items',
  'invoices',
  'invoiceitems',
  'invoice_payments',
  'payment_intents',
  'charges',
  'balance_transactions',
  'refunds',
  'disputes',
  'checkout_sessions',
  'payouts',
  'events',
];

export function generateAccount(account: AccountState, clock: Clock, input: GenerateInput): GenerateSummary {
  if (!Number.isInteger(input.seed)) throw new Error('generate needs an integer seed');
  const before = new Map(COUNTED.map((c) => [c, account.collection(c).size]));
  new Generator(account, clock, input).run();
  account.generations++;
  const summary: GenerateSummary = {};
  for (const c of COUNTED) summary[c] = account.collection(c).size - (before.get(c) ?? 0);
  return summary;
}
