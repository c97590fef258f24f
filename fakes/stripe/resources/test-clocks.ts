/**
 * Test clocks (`/v1/test_helpers/test_clocks`): in the fake as in Stripe's test mode, the way
 * time moves billing. Customers made with `test_clock` live at its frozen time; advancing it
 * runs, in time order, what falls due for them between the old and the new frozen time:
 * - trials: customer.subscription.trial_will_end three days before the end; at the end the
 *   subscription turns active and its first paid period is invoiced (as a renewal);
 * - renewals: at each period end the items move on a period, a subscription_cycle invoice is
 *   drafted (invoice.created) and, an hour later as Stripe does, finalized (invoice.finalized)
 *   and charged; other drafts finalize at their automatically_finalizes_at;
 * - payment with the subscription's, else the customer's, default payment method: paid
 *   (payment intent, charge, balance transaction, invoice.paid, invoice.payment_succeeded),
 *   or invoice.payment_failed, the subscription past_due and the customer delinquent;
 * - retries ("smart retries", simplified): a failed automatic payment is retried every
 *   RETRY_DAYS; after MAX_ATTEMPTS failed attempts there is no further retry, the invoice stays
 *   open and the subscription is canceled (reason payment_failed: the "cancel the
 *   subscription" choice of Stripe's dunning settings, not "mark unpaid");
 * - cancel_at / cancel_at_period_end end the subscription then (customer.subscription.deleted);
 * - an incomplete subscription expires 23 hours after it was made (incomplete_expired, its first
 *   invoice voided).
 * Objects are dated when things happen on the clock, events at real time. The clock answers the
 * advance as `advancing` (as Stripe does) but is already `ready` when the call returns.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, noSuch, StripeApiError } from '../errors.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { addInterval, subscriptionLine } from './billing.ts';
import { int, type Json, str } from './common.ts';
import { crudRoutes, type ResourceDef } from './crud.ts';
import { buildInvoice, claimPendingItems, finalizeInvoice, payInvoice, withLines } from './invoice-model.ts';
import { CUSTOMERS, INVOICES, SUBSCRIPTION_ITEMS, SUBSCRIPTIONS, TEST_CLOCKS } from './names.ts';
import { itemsOf, withItems } from './subscription-items.ts';
import { cancelSubscription } from './subscriptions.ts';

const HOUR = 3600;
const DAY = 86_400;
/** Stripe deletes a test clock (and its objects) some time after creating it; the fake only shows the date. */
const LIFETIME_DAYS = 30;
/** Days between a failed automatic payment and its retry, and failed attempts before giving up. */
export const RETRY_DAYS = 3;
export const MAX_ATTEMPTS = 3;
/** An incomplete subscription's first invoice may be paid for 23 hours. */
const INCOMPLETE_HOURS = 23;
const ENDED = new Set(['canceled', 'incomplete_expired']);

function create({ ctx, params }: Call): StripeObject {
  if (ctx.livemode) throw invalidRequest('Test clocks are only available in test mode.');
  const frozen = int(params.frozen_time) as number;
  const customerId = str(params.customer);
  const customer = customerId ? ctx.get(CUSTOMERS, customerId) : undefined;
  if (customerId && !customer) throw noSuch('customer', customerId, 'customer');
  if (customer?.test_clock)
    throw invalidRequest(`Customer ${customerId} is already attached to test clock ${String(customer.test_clock)}.`, { param: 'customer' });
  const clock = ctx.insert(TEST_CLOCKS, {
    id: ctx.newId(TEST_CLOCKS.prefix),
    object: 'test_helpers.test_clock',
    created: ctx.now,
    deletes_after: ctx.now + LIFETIME_DAYS * DAY,
    frozen_time: frozen,
    livemode: ctx.livemode,
    name: str(params.name) ?? null,
    status: 'ready',
    status_details: {},
  });
  if (customer) {
    // Attaching is for good; the customer's subscriptions follow it onto the clock.
    ctx.save(CUSTOMERS, { ...customer, test_clock: clock.id });
    for (const sub of [...ctx.col(SUBSCRIPTIONS.name).values()]) if (sub.customer === customer.id) ctx.save(SUBSCRIPTIONS, { ...sub, test_clock: clock.id });
  }
  return clock;
}

/** Deleting a clock deletes its customers (and so cancels their subscriptions), as Stripe does. */
function remove({ ctx }: Call, clock: StripeObject): unknown {
  for (const customer of [...ctx.col(CUSTOMERS.name).values()]) {
    if (customer.test_clock !== clock.id) continue;
    for (const sub of [...ctx.col(SUBSCRIPTIONS.name).values()])
      if (sub.customer === customer.id && !ENDED.has(sub.status as string)) cancelSubscription(ctx, sub, {});
    ctx.destroy(CUSTOMERS, customer);
  }
  return ctx.destroy(TEST_CLOCKS, clock);
}

/** Stripe's limit: two intervals of the clock's shortest live subscription, else two years. */
function furthest(ctx: Ctx, customers: Set<string>, frozen: number): number {
  let limit = addInterval(frozen, 'year', 2);
  for (const sub of ctx.col(SUBSCRIPTIONS.name).values()) {
    if (!customers.has(sub.customer as string) || ENDED.has(sub.status as string)) continue;
    for (const item of itemsOf(ctx, sub.id)) {
      const r = (item.price as StripeObject).recurring as { interval: string; interval_count: number };
      limit = Math.min(limit, addInterval(frozen, r.interval, 2 * r.interval_count));
    }
  }
  return limit;
}

/** The period starting at `time`: it ends on the next anniversary of the billing anchor, so Jan 31 → Feb 28 → Mar 31. */
function periodFrom(anchor: number, time: number, price: StripeObject): { start: number; end: number } {
  const r = price.recurring as { interval: string; interval_count: number };
  let n = 1;
  let end = addInterval(anchor, r.interval, r.interval_count);
  while (end <= time) end = addInterval(anchor, r.interval, ++n * r.interval_count);
  return { start: time, end };
}

function advance({ ctx, params, path }: Call): StripeObject {
  const clock = ctx.find(TEST_CLOCKS, path.test_clock as string, 'test_clock');
  const from = clock.frozen_time as number;
  const to = int(params.frozen_time) as number;
  if (to <= from) {
    throw invalidRequest(`The test clock can only be advanced to a time after its current frozen_time (${from}); ${to} is not.`, { param: 'frozen_time' });
  }
  const run = new Advance(ctx, clock.id);
  const limit = furthest(ctx, run.customers, from);
  if (to > limit) {
    throw invalidRequest(
      `A test clock cannot be advanced more than two intervals of its shortest subscription (or two years) past its frozen_time; the furthest it can go now is ${limit}.`,
      { param: 'frozen_time' },
    );
  }
  const advancing = ctx.save(
    TEST_CLOCKS,
    { ...clock, status: 'advancing', status_details: { advancing: { target_frozen_time: to } } },
    'test_helpers.test_clock.advancing',
  );
  run.until(from, to);
  ctx.save(TEST_CLOCKS, { ...advancing, frozen_time: to, status: 'ready', status_details: {} }, 'test_helpers.test_clock.ready');
  return advancing;
}

interface Due {
  at: number;
  run: (at: Ctx, time: number) => void;
}

/** One advance of one clock: finds the next thing due, does it at its time, and again. */
class Advance {
  readonly customers = new Set<string>();
  private readonly subs: string[] = [];
  /** Drafts and open invoices of the clock's customers, including those the advance makes. */
  private readonly invoices = new Set<string>();

  constructor(
    private readonly ctx: Ctx,
    clockId: string,
  ) {
    for (const c of ctx.col(CUSTOMERS.name).values()) if (c.test_clock === clockId) this.customers.add(c.id);
    for (const s of ctx.col(SUBSCRIPTIONS.name).values()) if (this.customers.has(s.customer as string)) this.subs.push(s.id);
    for (const i of ctx.col(INVOICES.name).values())
      if (this.customers.has(i.customer as string) && (i.status === 'draft' || i.status === 'open')) this.invoices.add(i.id);
  }

  until(from: number, to: number): void {
    // Each step changes what is due; the cap only guards against a bug looping forever.
    for (let step = 0; step < 100_000; step++) {
      const due = this.next(to);
      if (!due) return;
      const time = Math.max(due.at, from);
      due.run(this.ctx.atTime(time), time);
    }
    throw new Error('test clock advance did not settle');
  }

  /** The earliest thing due by `to`; ties go to whatever is found first (cancellations before renewals). */
  private next(to: number): Due | undefined {
    let best: Due | undefined;
    const consider = (at: number | null | undefined, run: Due['run']) => {
      if (typeof at === 'number' && at <= to && (!best || at < best.at)) best = { at, run };
    };
    for (const id of this.subs) {
      const sub = this.ctx.get(SUBSCRIPTIONS, id);
      if (!sub || ENDED.has(sub.status as string)) continue;
      if (sub.status === 'incomplete') {
        consider((sub.created as number) + INCOMPLETE_HOURS * HOUR, (c, t) => this.expire(c, sub, t));
        continue;
      }
      const trialEnd = sub.trial_end as number | null;
      if (sub.status === 'trialing' && trialEnd !== null && !this.ctx.account.hidden.get(sub.id)?.trialWillEndSent) {
        const warn = trialEnd - 3 * DAY;
        if (warn > (sub.start_date as number)) consider(warn, (c) => this.trialWillEnd(c, sub));
      }
      const periodEnd = itemsOf(this.ctx, sub.id)[0]?.current_period_end as number | undefined;
      const cancelAt = sub.cancel_at as number | null;
      if (cancelAt !== null && (periodEnd === undefined || cancelAt <= periodEnd)) consider(cancelAt, (c, t) => this.end(c, sub, t, 'cancellation_requested'));
      else consider(periodEnd, (c, t) => this.renew(c, sub, t));
    }
    for (const id of this.invoices) {
      const inv = this.ctx.get(INVOICES, id);
      if (!inv || (inv.status !== 'draft' && inv.status !== 'open')) {
        this.invoices.delete(id);
        continue;
      }
      if (inv.status === 'draft') consider(inv.automatically_finalizes_at as number | null, (c, t) => this.finalize(c, inv, t));
      else if (this.retries(inv)) consider(inv.next_payment_attempt as number | null, (c, t) => this.attempt(c, inv, t));
    }
    return best;
  }

  /** Whether Stripe charges this open invoice by itself (an incomplete subscription's first invoice waits for the customer). */
  private retries(inv: StripeObject): boolean {
    if (inv.collection_method !== 'charge_automatically' || inv.auto_advance !== true) return false;
    const sub = this.subscriptionOf(inv);
    return !(inv.billing_reason === 'subscription_create' && sub && (sub.status === 'incomplete' || sub.status === 'incomplete_expired'));
  }

  private subscriptionOf(inv: StripeObject): StripeObject | undefined {
    const id = (inv.parent as { subscription_details?: { subscription: string } } | null)?.subscription_details?.subscription;
    return id ? this.ctx.get(SUBSCRIPTIONS, id) : undefined;
  }

  private trialWillEnd(ctx: Ctx, sub: StripeObject): void {
    ctx.account.hidden.set(sub.id, { ...(ctx.account.hidden.get(sub.id) ?? {}), trialWillEndSent: true });
    ctx.emit('customer.subscription.trial_will_end', sub);
  }

  /** A period ends (a trial's too): the items move on, the next period is invoiced as a draft. */
  private renew(ctx: Ctx, sub: StripeObject, time: number): void {
    const items = itemsOf(ctx, sub.id);
    const previousStart = (items[0]?.current_period_start as number | undefined) ?? time;
    const col = ctx.col(SUBSCRIPTION_ITEMS.name);
    const moved = items.map((item) => {
      const period = periodFrom(sub.billing_cycle_anchor as number, time, item.price as StripeObject);
      const next: StripeObject = { ...item, current_period_start: period.start, current_period_end: period.end };
      col.replace(next);
      return next;
    });
    const customer = ctx.find(CUSTOMERS, sub.customer as string);
    const draft = buildInvoice(ctx, {
      customer,
      currency: sub.currency as string,
      billingReason: 'subscription_cycle',
      collectionMethod: sub.collection_method as string,
      subscription: sub,
      autoAdvance: true,
      daysUntilDue: sub.days_until_due as number | null,
    });
    // A renewal invoice bills the period that ended (pending items) and the one starting; it stays a draft for an hour.
    Object.assign(draft, { period_start: previousStart, period_end: time, automatically_finalizes_at: time + HOUR });
    const lines: Json[] = moved.map((item) =>
      subscriptionLine(
        ctx,
        sub.id,
        { id: item.id, price: item.price as StripeObject, quantity: (item.quantity as number | undefined) ?? 1 },
        {
          id: ctx.newId('il'),
          invoice: draft.id,
          period: { start: item.current_period_start as number, end: item.current_period_end as number },
        },
      ),
    );
    lines.push(...claimPendingItems(ctx, customer.id, draft.id, sub.id));
    const invoice = ctx.insert(INVOICES, withLines(ctx, draft, lines));
    this.invoices.add(invoice.id);
    const status = sub.status === 'trialing' ? 'active' : sub.status;
    ctx.save(SUBSCRIPTIONS, withItems(ctx, { ...sub, latest_invoice: invoice.id, status }));
  }

  private finalize(ctx: Ctx, draft: StripeObject, time: number): void {
    const open = finalizeInvoice(ctx, draft);
    // Subscription invoices are charged as they finalize; others at their next_payment_attempt.
    if (open.status === 'open' && open.collection_method === 'charge_automatically' && this.subscriptionOf(open)) this.attempt(ctx, open, time);
  }

  /** One automatic payment attempt, and what its outcome does to the subscription and customer. */
  private attempt(ctx: Ctx, invoice: StripeObject, time: number): void {
    const sub = this.subscriptionOf(invoice);
    const last = (invoice.attempt_count as number) + 1 >= MAX_ATTEMPTS;
    const pm = (sub?.default_payment_method as string | null | undefined) ?? undefined;
    try {
      payInvoice(ctx, invoice, pm, { next_payment_attempt: last ? null : time + RETRY_DAYS * DAY });
    } catch (e) {
      if (!(e instanceof StripeApiError)) throw e;
      this.delinquent(ctx, invoice.customer as string, true);
      if (!sub || ENDED.has(sub.status as string)) return;
      if (last) this.end(ctx, sub, time, 'payment_failed');
      else if (sub.status === 'active') ctx.save(SUBSCRIPTIONS, { ...sub, status: 'past_due' });
      return;
    }
    this.delinquent(ctx, invoice.customer as string, false);
    if (sub && sub.status === 'past_due' && !this.owesMore(ctx, sub.id)) ctx.save(SUBSCRIPTIONS, { ...sub, status: 'active' });
  }

  private owesMore(ctx: Ctx, subId: string): boolean {
    for (const id of this.invoices) {
      const inv = ctx.get(INVOICES, id);
      if (inv?.status === 'open' && this.subscriptionOf(inv)?.id === subId) return true;
    }
    return false;
  }

  /** Stripe's `delinquent`: set by an automatic payment failure, cleared by a payment. */
  private delinquent(ctx: Ctx, customerId: string, value: boolean): void {
    const customer = ctx.get(CUSTOMERS, customerId);
    if (customer && customer.delinquent !== value) ctx.save(CUSTOMERS, { ...customer, delinquent: value });
  }

  private end(ctx: Ctx, sub: StripeObject, time: number, reason: string): void {
    const details = { ...(sub.cancellation_details as Json), reason };
    ctx.save(
      SUBSCRIPTIONS,
      { ...sub, status: 'canceled', canceled_at: sub.canceled_at ?? time, ended_at: time, cancellation_details: details },
      'customer.subscription.deleted',
    );
  }

  /** The first invoice went unpaid for 23 hours: it is voided and the subscription expires (an update, not a deletion). */
  private expire(ctx: Ctx, sub: StripeObject, time: number): void {
    const invoice = typeof sub.latest_invoice === 'string' ? ctx.get(INVOICES, sub.latest_invoice) : undefined;
    if (invoice?.status === 'open') {
      const transitions = { ...(invoice.status_transitions as Json), voided_at: time };
      ctx.save(
        INVOICES,
        { ...invoice, status: 'void', status_transitions: transitions, auto_advance: false, next_payment_attempt: null, amount_remaining: 0 },
        'invoice.voided',
      );
    }
    ctx.save(SUBSCRIPTIONS, { ...sub, status: 'incomplete_expired', canceled_at: time, ended_at: time });
  }
}

const testClocks: ResourceDef = {
  ...TEST_CLOCKS,
  path: '/v1/test_helpers/test_clocks',
  idParam: 'test_clock',
  create,
  remove,
};

export const testClockRoutes: Route[] = [
  ...crudRoutes(testClocks),
  { method: 'POST', template: '/v1/test_helpers/test_clocks/{test_clock}/advance', group: TEST_CLOCKS.group, handler: advance },
];
