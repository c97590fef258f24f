/**
 * Billing traffic: one SaaS business's own backend driving its Stripe account through the
 * official client, straight at the upstream (no proxy), so the sync has an account that lives
 * the way real ones do. Seeded: every choice comes from `random`, so a seed replays the same
 * traffic (what the upstream answers may still differ with timing, e.g. a 429).
 *
 * It sets up a small catalogue (three plans, monthly and yearly, a coupon), then mixes sign-ups
 * (a card, sometimes a declining or disputing one, sometimes a trial), plan changes,
 * cancellations, test-clock advances (renewals, trials ending, dunning), one-off invoices,
 * refunds, disputes (Stripe's dispute test card), cards attached and detached, coupons, price
 * changes, customer updates and deletions, and bursts (several writes to one object within
 * ~100 ms, so one poll of the events feed sees them together).
 *
 * Customers live on test clocks, three to a clock (Stripe limits the customers of one clock;
 * several clocks also exercise listing per clock), so time can move for them. Test clocks exist
 * in test mode only: on a live-mode account their creation is refused and the traffic goes on
 * without clocks (then nothing renews).
 *
 * Every request is paced to `maxRequestsPerSecond` in any sliding second (retries included);
 * a 429 counts `no('rate_limited')` and halves the pace for a few seconds. Each request counts
 * `ok(kind)`, or `no(kind)` when the upstream refuses it (4xx: the state moved on, a card
 * declined), or `no('upstream_error')` (5xx, network). Nothing upstream makes run() throw.
 */
import Stripe from 'stripe';
import { pause } from '../../src/time.ts';
import type { Random } from '../random.ts';
import { OpCounts, type TrafficActor } from '../types.ts';

export interface StripeTrafficOptions {
  stripe: Stripe;
  random: Random;
  log(message: string): void;
  /** most requests per second this actor may send (the caller keeps the account's limit) */
  maxRequestsPerSecond: number;
}

const DAY = 86_400;
const CUSTOMERS_PER_CLOCK = 3;
/** Past this many customers, sign-ups give way to deletions: the account stays bounded. */
const MAX_CUSTOMERS = 60;
const GOOD_CARDS = ['tok_visa', 'tok_mastercard', 'tok_amex', 'tok_visa_debit'];
/** Attaches fine, declines every charge (Stripe's 4000 0000 0000 0341). */
const DECLINING_CARD = 'tok_chargeCustomerFail';
/** Charges succeed, then are disputed (Stripe's 4000 0000 0000 0259). */
const DISPUTED_CARD = 'tok_createDispute';
const TIERS = [
  { name: 'Starter', monthly: 900 },
  { name: 'Team', monthly: 2900 },
  { name: 'Business', monthly: 9900 },
];
const NAMES = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Donald', 'Frances', 'Radia', 'Ken', 'Hedy'];
const CITIES = ['Austin', 'Boston', 'Denver', 'Portland', 'Chicago'];
/** How many entries of the op trace are kept (for comparing two runs of one seed). */
const TRACE_LIMIT = 2000;
/** A request the upstream never answers (a hang fault) is given up after this long, as a backend would. */
const REQUEST_TIMEOUT_MS = 20_000;
const STOPPED = Symbol('stopped');

const WEIGHTS = {
  signup: 10,
  subscribe: 6,
  upgrade: 4,
  downgrade: 3,
  cancel: 4,
  advance: 6,
  invoice: 4,
  refund: 3,
  dispute: 1,
  attachCard: 4,
  detachCard: 2,
  coupon: 2,
  priceChange: 1,
  updateCustomer: 5,
  deleteCustomer: 1,
  burst: 3,
};
type Op = keyof typeof WEIGHTS;

/** What the business remembers of its account (its own database, in real life). */
type Plan = { product: string; prices: { month: string; year: string }; amount: number };
type Clock = { id: string; time: number; customers: number };
type Customer = { id: string; clock: string | null; cards: string[]; defaultCard: string | null; declining: boolean };
type Sub = {
  id: string;
  customer: string;
  item: string;
  plan: number;
  interval: 'month' | 'year';
  status: string;
  endsAtPeriodEnd: boolean;
  periodEnd: number;
};

const LIVE = new Set(['active', 'trialing', 'past_due']);

/**
 * At most `perSecond` requests in any sliding second (with a margin for arrival jitter), half
 * that for a while after a 429; spread evenly, except a burst, which goes back to back.
 */
class Window {
  private readonly sent: number[] = [];
  private slowUntil = 0;
  bursting = false;

  constructor(private readonly perSecond: number) {}

  private limit = (now: number) => Math.max(1, now < this.slowUntil ? Math.floor(this.perSecond / 2) : this.perSecond);
  slowDown = () => void (this.slowUntil = Date.now() + 5000);

  /** Waits until `n` requests may go out at once (a burst), without booking them; false when aborted. */
  async room(n: number, signal: AbortSignal): Promise<boolean> {
    for (;;) {
      const now = Date.now();
      while (this.sent.length > 0 && this.sent[0]! <= now - 1100) this.sent.shift();
      if (this.sent.length + Math.min(n, this.limit(now)) <= this.limit(now)) return true;
      await pause(this.sent[0]! + 1101 - now, signal);
      if (signal.aborted) return false;
    }
  }

  async take(signal: AbortSignal): Promise<boolean> {
    if (!(await this.room(1, signal))) return false;
    const gap = (this.sent.at(-1) ?? 0) + 1000 / this.limit(Date.now()) - Date.now();
    if (!this.bursting && gap > 0) await pause(gap, signal);
    if (signal.aborted) return false;
    this.sent.push(Date.now());
    return true;
  }
}

class BillingTraffic implements TrafficActor {
  readonly name = 'stripe billing';
  readonly counts = new OpCounts();
  /** `kind:ok` / `kind:no` in order, the first TRACE_LIMIT of them. */
  readonly trace: string[] = [];
  doing: string | undefined;
  private readonly window: Window;
  private readonly plans: Plan[] = [];
  private couponId: string | undefined;
  private readonly clocks: Clock[] = [];
  /** Set once the account refused a test clock (live mode): sign-ups go without. */
  private noClocks = false;
  private readonly customers: Customer[] = [];
  private readonly subs: Sub[] = [];
  private readonly refusedKinds = new Set<string>();
  /** The HTTP status of the last request that failed (undefined: a network error). */
  private lastStatus: number | undefined;
  private signal = new AbortController().signal;
  /** Settles when the run is stopped: a request still waiting for its answer is left behind. */
  private stopped: Promise<typeof STOPPED> = new Promise(() => undefined);

  constructor(private readonly o: StripeTrafficOptions) {
    this.window = new Window(o.maxRequestsPerSecond);
  }

  private get r(): Random {
    return this.o.random;
  }

  private note(kind: string, ok: boolean): void {
    if (ok) this.counts.ok(kind);
    else this.counts.no(kind);
    if (this.trace.length < TRACE_LIMIT) this.trace.push(`${kind}:${ok ? 'ok' : 'no'}`);
  }

  /**
   * One request: paced, retried after a 429 (twice), counted. Answers undefined when it was
   * refused, failed or the run was stopped.
   */
  private async req<T>(kind: string, call: (opts: Stripe.RequestOptions) => Promise<T>): Promise<T | undefined> {
    for (let attempt = 0; ; attempt++) {
      if (!(await this.window.take(this.signal))) return undefined;
      this.doing = kind;
      try {
        const request = call({ maxNetworkRetries: 0, timeout: REQUEST_TIMEOUT_MS });
        request.catch(() => undefined);
        const answer = await Promise.race([request, this.stopped]);
        if (answer === STOPPED) return undefined;
        this.note(kind, true);
        return answer;
      } catch (error) {
        if (this.signal.aborted) return undefined;
        const status = error instanceof Stripe.errors.StripeError ? error.statusCode : undefined;
        this.lastStatus = status;
        if (status === 429) {
          this.counts.no('rate_limited');
          this.window.slowDown();
          // Not a seeded choice: 429s depend on timing, the seeded stream must not.
          if (attempt < 2) {
            await pause(500 * (attempt + 1), this.signal);
            continue;
          }
        } else if (status !== undefined && status >= 400 && status < 500) {
          this.note(kind, false);
          // A refusal the state explains is normal; say once per kind what it was, in case it is a wrong request.
          if (status === 400 && !this.refusedKinds.has(kind)) {
            this.refusedKinds.add(kind);
            this.o.log(`stripe billing: ${kind} refused: ${(error as Error).message}`);
          }
        } else this.counts.no('upstream_error');
        return undefined;
      }
    }
  }

  async run(signal: AbortSignal): Promise<void> {
    this.signal = signal;
    this.stopped = new Promise((resolve) => (signal.aborted ? resolve(STOPPED) : signal.addEventListener('abort', () => resolve(STOPPED), { once: true })));
    while (!signal.aborted) {
      try {
        if (this.plans.length < TIERS.length) await this.catalogue();
        else await this.step(this.r.weighted(WEIGHTS));
      } catch (error) {
        // A bug here, not an upstream answer: say so, keep going.
        this.counts.no('internal');
        this.o.log(`stripe billing: unexpected ${(error as Error).stack ?? String(error)}`);
        await pause(1000, signal);
      }
    }
  }

  private async step(op: Op): Promise<void> {
    const done = await this[op]();
    // An operation with nothing to act on yet: a sign-up instead.
    if (done === false && op !== 'signup') await this.signup();
  }

  /** Plans (a product with a monthly and a yearly price) and a coupon; resumes where it stopped. */
  private async catalogue(): Promise<void> {
    const tier = TIERS[this.plans.length]!;
    const product = await this.req('product.create', (o) => this.o.stripe.products.create({ name: tier.name, metadata: { tier: tier.name.toLowerCase() } }, o));
    if (!product) {
      await pause(500, this.signal);
      return;
    }
    const month = await this.price(product.id, tier.monthly, 'month');
    const year = month && (await this.price(product.id, tier.monthly * 10, 'year'));
    if (!month || !year) return;
    this.plans.push({ product: product.id, prices: { month, year }, amount: tier.monthly });
    if (this.plans.length === TIERS.length) {
      const coupon = await this.req('coupon.create', (o) =>
        this.o.stripe.coupons.create({ percent_off: 20, duration: 'repeating', duration_in_months: 3, name: 'Launch 20%' }, o),
      );
      this.couponId = coupon?.id;
    }
  }

  private async price(product: string, amount: number, interval: 'month' | 'year'): Promise<string | undefined> {
    const price = await this.req('price.create', (o) =>
      this.o.stripe.prices.create({ product, currency: 'usd', unit_amount: amount, recurring: { interval } }, o),
    );
    return price?.id;
  }

  /** One of the items `filter` keeps, at random; undefined when none. */
  private anyOf<T>(items: T[], filter: (item: T) => boolean = () => true): T | undefined {
    const found = items.filter(filter);
    return found.length > 0 ? this.r.pick(found) : undefined;
  }

  /** A clock with room for one more customer, made when none has; undefined without clocks. */
  private async clockWithRoom(): Promise<Clock | undefined> {
    if (this.noClocks) return undefined;
    const open = this.clocks.find((c) => c.customers < CUSTOMERS_PER_CLOCK);
    if (open) return open;
    // A new clock starts at the business's present: the furthest any clock has gone.
    const time = this.clocks.reduce((t, c) => Math.max(t, c.time), Math.floor(Date.now() / 1000 / 3600) * 3600);
    const clock = await this.req('test_clock.create', (o) =>
      this.o.stripe.testHelpers.testClocks.create({ frozen_time: time, name: `billing ${this.clocks.length + 1}` }, o),
    );
    if (!clock) {
      // Refused outright (not a fault or a 429): this account has no test clocks.
      const status = this.lastStatus;
      if (!this.signal.aborted && this.clocks.length === 0 && status !== undefined && status >= 400 && status < 500 && status !== 429) {
        this.noClocks = true;
        this.o.log('stripe billing: the account refuses test clocks (live mode?); customers go without one, so nothing renews');
      }
      return undefined;
    }
    const entry = { id: clock.id, time, customers: 0 };
    this.clocks.push(entry);
    return entry;
  }

  private async newCard(token: string): Promise<string | undefined> {
    const pm = await this.req('payment_method.create', (o) => this.o.stripe.paymentMethods.create({ type: 'card', card: { token } }, o));
    return pm?.id;
  }

  private async signup(): Promise<boolean> {
    if (this.customers.length >= MAX_CUSTOMERS) return this.deleteCustomer();
    const clock = await this.clockWithRoom();
    if (!clock && !this.noClocks) return true;
    const roll = this.r.next();
    const token = roll < 0.12 ? DECLINING_CARD : roll < 0.17 ? DISPUTED_CARD : this.r.pick(GOOD_CARDS);
    const card = await this.newCard(token);
    if (!card) return true;
    const name = `${this.r.pick(NAMES)} ${this.r.int(10_000)}`;
    const params: Stripe.CustomerCreateParams = {
      name,
      email: `${name.replace(' ', '.').toLowerCase()}@example.com`,
      metadata: { source: this.r.pick(['ads', 'referral', 'organic']) },
    };
    Object.assign(params, { payment_method: card, invoice_settings: { default_payment_method: card } }, clock ? { test_clock: clock.id } : {});
    const customer = await this.req('customer.create', (o) => this.o.stripe.customers.create(params, o));
    if (!customer) return true;
    if (clock) clock.customers++;
    const entry: Customer = { id: customer.id, clock: clock?.id ?? null, cards: [card], defaultCard: card, declining: token === DECLINING_CARD };
    this.customers.push(entry);
    if (this.r.chance(0.75)) await this.subscribeCustomer(entry);
    return true;
  }

  private async subscribe(): Promise<boolean> {
    const customer = this.anyOf(this.customers, (c) => !this.subs.some((s) => s.customer === c.id && s.status !== 'incomplete'));
    if (!customer) return false;
    await this.subscribeCustomer(customer);
    return true;
  }

  private async subscribeCustomer(customer: Customer): Promise<void> {
    const plan = this.r.int(this.plans.length);
    const interval = this.r.chance(0.85) ? 'month' : 'year';
    const trial = this.r.chance(0.3) ? this.r.pick([7, 14]) : undefined;
    const discounted = this.couponId !== undefined && this.r.chance(0.15);
    const params: Stripe.SubscriptionCreateParams = { customer: customer.id, items: [{ price: this.plans[plan]!.prices[interval] }] };
    Object.assign(params, trial ? { trial_period_days: trial } : {}, discounted ? { discounts: [{ coupon: this.couponId }] } : {});
    const sub = await this.req('subscription.create', (o) => this.o.stripe.subscriptions.create(params, o));
    const item = sub?.items.data[0];
    if (sub && item)
      this.subs.push({
        id: sub.id,
        customer: customer.id,
        item: item.id,
        plan,
        interval,
        status: sub.status,
        endsAtPeriodEnd: false,
        periodEnd: item.current_period_end,
      });
  }

  private upgrade = (): Promise<boolean> => this.changePlan(+1);
  private downgrade = (): Promise<boolean> => this.changePlan(-1);

  /** The item's price moves to the next plan up or down, same interval; no proration. */
  private async changePlan(direction: 1 | -1): Promise<boolean> {
    const sub = this.anyOf(this.subs, (s) => LIVE.has(s.status) && this.plans[s.plan + direction] !== undefined);
    if (!sub) return false;
    const plan = sub.plan + direction;
    const kind = direction > 0 ? 'subscription.upgrade' : 'subscription.downgrade';
    const items = [{ id: sub.item, price: this.plans[plan]!.prices[sub.interval] }];
    const answer = await this.req(kind, (o) => this.o.stripe.subscriptions.update(sub.id, { items, proration_behavior: 'none' }, o));
    if (answer) Object.assign(sub, { plan, status: answer.status });
    return true;
  }

  private async cancel(): Promise<boolean> {
    const sub = this.anyOf(this.subs, (s) => LIVE.has(s.status) && !s.endsAtPeriodEnd);
    if (!sub) return false;
    if (this.r.chance(0.5)) {
      const answer = await this.req('subscription.cancel', (o) => this.o.stripe.subscriptions.cancel(sub.id, {}, o));
      if (answer) sub.status = answer.status;
    } else {
      const answer = await this.req('subscription.cancel_at_period_end', (o) => this.o.stripe.subscriptions.update(sub.id, { cancel_at_period_end: true }, o));
      if (answer) sub.endsAtPeriodEnd = true;
    }
    return true;
  }

  /**
   * One clock moves a few days to a month, or just past its next renewal (as one fast-forwards
   * to see it): renewals, trials ending, dunning. Then what changed is read back, as a backend would.
   */
  private async advance(): Promise<boolean> {
    const clocks = this.clocks.filter((c) => this.customers.some((cu) => cu.clock === c.id));
    if (clocks.length === 0) return false;
    const clock = this.r.pick(clocks);
    const onClock = new Set(this.customers.filter((c) => c.clock === clock.id).map((c) => c.id));
    const next = Math.min(...this.subs.filter((s) => onClock.has(s.customer) && s.periodEnd > clock.time).map((s) => s.periodEnd));
    const toRenewal = this.r.chance(0.5) && next - clock.time <= 45 * DAY;
    const to = toRenewal ? next + this.r.between(2, 30) * 3600 : clock.time + this.r.between(2, 30) * DAY + this.r.int(24) * 3600;
    const answer = await this.req('test_clock.advance', (o) => this.o.stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: to }, o));
    if (!answer) return true;
    clock.time = to;
    for (let i = 0; i < 5; i++) {
      const state = await this.req('test_clock.retrieve', (o) => this.o.stripe.testHelpers.testClocks.retrieve(clock.id, {}, o));
      if (!state || state.status === 'ready') break;
      await pause(200, this.signal);
    }
    const list = await this.req('subscription.list', (o) => this.o.stripe.subscriptions.list({ test_clock: clock.id, status: 'all', limit: 100 }, o));
    for (const s of list?.data ?? []) {
      const known = this.subs.find((k) => k.id === s.id);
      if (known) Object.assign(known, { status: s.status, periodEnd: s.items.data[0]?.current_period_end ?? known.periodEnd });
    }
    this.prune();
    return true;
  }

  /** Forgets subscriptions that ended: nothing more can happen to them. */
  private prune(): void {
    for (let i = this.subs.length - 1; i >= 0; i--) if (['canceled', 'incomplete_expired'].includes(this.subs[i]!.status)) this.subs.splice(i, 1);
  }

  /** A one-off charge: item, invoice, finalize, pay, back to back (a burst of invoice events). */
  private async invoice(): Promise<boolean> {
    const customer = this.anyOf(this.customers);
    if (!customer) return false;
    await this.inBurst(4, async () => {
      const amount = this.r.between(5, 80) * 100;
      const description = this.r.pick(['Onboarding', 'Extra seats', 'Support hours']);
      const item = await this.req('invoiceitem.create', (o) =>
        this.o.stripe.invoiceItems.create({ customer: customer.id, amount, currency: 'usd', description }, o),
      );
      const draft =
        item &&
        (await this.req('invoice.create', (o) =>
          this.o.stripe.invoices.create({ customer: customer.id, pending_invoice_items_behavior: 'include', auto_advance: false }, o),
        ));
      const open = draft && (await this.req('invoice.finalize', (o) => this.o.stripe.invoices.finalizeInvoice(draft.id, {}, o)));
      if (!open) return;
      await this.req('invoice.pay', (o) => this.o.stripe.invoices.pay(open.id, {}, o));
      this.note('burst.invoice', true);
    });
    return true;
  }

  /** `n` requests back to back, once the window has room for all of them. */
  private async inBurst(n: number, run: () => Promise<void>): Promise<void> {
    if (!(await this.window.room(n, this.signal))) return;
    this.window.bursting = true;
    try {
      await run();
    } finally {
      this.window.bursting = false;
    }
  }

  private async refund(): Promise<boolean> {
    const charges = await this.req('charge.list', (o) => this.o.stripe.charges.list({ limit: 20 }, o));
    const refundable = (charges?.data ?? []).filter((c) => c.status === 'succeeded' && !c.disputed && c.amount_refunded < c.amount);
    if (refundable.length === 0) return true;
    const charge = this.r.pick(refundable);
    const partial = this.r.chance(0.4) ? Math.floor((charge.amount - charge.amount_refunded) / 2) : undefined;
    await this.req('refund.create', (o) => this.o.stripe.refunds.create({ charge: charge.id, ...(partial ? { amount: partial } : {}) }, o));
    return true;
  }

  /** A payment on Stripe's dispute test card: it succeeds, then the cardholder disputes it; sometimes the business answers with evidence. */
  private async dispute(): Promise<boolean> {
    const card = await this.newCard(DISPUTED_CARD);
    const pi =
      card &&
      (await this.req('payment_intent.create', (o) =>
        this.o.stripe.paymentIntents.create({ amount: this.r.between(10, 200) * 100, currency: 'usd', payment_method: card, confirm: true }, o),
      ));
    if (!pi) return true;
    const disputes = await this.req('dispute.list', (o) => this.o.stripe.disputes.list({ payment_intent: pi.id, limit: 1 }, o));
    const dispute = disputes?.data[0];
    if (dispute && this.r.chance(0.5)) {
      await this.req('dispute.update', (o) =>
        this.o.stripe.disputes.update(dispute.id, { evidence: { uncategorized_text: 'Service was delivered as agreed.' }, submit: this.r.chance(0.5) }, o),
      );
    }
    return true;
  }

  /** A new card: it replaces a declining one, or (sometimes) is the card that starts to decline. */
  private async attachCard(): Promise<boolean> {
    const customer = (this.r.chance(0.6) && this.anyOf(this.customers, (c) => c.declining)) || this.anyOf(this.customers);
    if (!customer) return false;
    const bad = !customer.declining && this.r.chance(0.25);
    const card = await this.newCard(bad ? DECLINING_CARD : this.r.pick(GOOD_CARDS));
    const attached = card && (await this.req('payment_method.attach', (o) => this.o.stripe.paymentMethods.attach(card, { customer: customer.id }, o)));
    if (!attached) return true;
    customer.cards.push(attached.id);
    if (customer.declining || bad || this.r.chance(0.5)) {
      const updated = await this.req('customer.default_card', (o) =>
        this.o.stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: attached.id } }, o),
      );
      if (updated) Object.assign(customer, { defaultCard: attached.id, declining: bad });
    }
    return true;
  }

  private async detachCard(): Promise<boolean> {
    const customer = this.anyOf(this.customers, (c) => c.cards.length > 1);
    if (!customer) return false;
    const card = this.r.pick(customer.cards.filter((c) => c !== customer.defaultCard));
    await this.req('payment_method.detach', (o) => this.o.stripe.paymentMethods.detach(card, {}, o));
    customer.cards = customer.cards.filter((c) => c !== card);
    return true;
  }

  private async coupon(): Promise<boolean> {
    const sub = this.anyOf(this.subs, (s) => LIVE.has(s.status));
    const coupon = this.couponId;
    if (!sub || !coupon) return false;
    await this.req('subscription.coupon', (o) => this.o.stripe.subscriptions.update(sub.id, { discounts: [{ coupon }] }, o));
    return true;
  }

  /** A plan's price goes up: a new price, the old one archived (its subscribers keep it). */
  private async priceChange(): Promise<boolean> {
    const plan = this.r.pick(this.plans);
    const interval = this.r.chance(0.7) ? 'month' : 'year';
    const amount = plan.amount + this.r.between(1, 5) * 100;
    const fresh = await this.price(plan.product, interval === 'month' ? amount : amount * 10, interval);
    if (!fresh) return true;
    const old = plan.prices[interval];
    plan.prices[interval] = fresh;
    if (interval === 'month') plan.amount = amount;
    await this.req('price.archive', (o) => this.o.stripe.prices.update(old, { active: false }, o));
    return true;
  }

  private async updateCustomer(): Promise<boolean> {
    const customer = this.anyOf(this.customers);
    if (!customer) return false;
    const changes: Array<() => Stripe.CustomerUpdateParams> = [
      () => ({ name: `${this.r.pick(NAMES)} ${this.r.int(10_000)}` }),
      () => ({ email: `billing${this.r.int(10_000)}@example.com` }),
      () => ({ address: { city: this.r.pick(CITIES), country: 'US', postal_code: String(this.r.between(10_000, 99_999)) } }),
      () => ({ metadata: { seats: String(this.r.between(1, 50)) } }),
    ];
    const params = this.r.pick(changes)();
    await this.req('customer.update', (o) => this.o.stripe.customers.update(customer.id, params, o));
    return true;
  }

  /** A customer leaves: deleting cancels their subscriptions. */
  private async deleteCustomer(): Promise<boolean> {
    if (this.customers.length <= 5) return false;
    const customer = this.r.pick(this.customers);
    const done = await this.req('customer.delete', (o) => this.o.stripe.customers.del(customer.id, {}, o));
    if (!done) return true;
    this.customers.splice(this.customers.indexOf(customer), 1);
    for (const sub of this.subs) if (sub.customer === customer.id) sub.status = 'canceled';
    this.prune();
    return true;
  }

  /** 3–5 metadata writes to one customer or subscription within ~100 ms. */
  private async burst(): Promise<boolean> {
    const sub = this.r.chance(0.3) ? this.anyOf(this.subs, (s) => LIVE.has(s.status)) : undefined;
    const customer = sub ? undefined : this.anyOf(this.customers);
    if (!sub && !customer) return false;
    const n = this.r.between(3, 5);
    await this.inBurst(n, async () => {
      for (let i = 1; i <= n; i++) {
        const metadata = { step: String(i), note: this.r.pick(['called', 'emailed', 'upsell', 'churn-risk']) };
        if (sub) await this.req('subscription.update', (o) => this.o.stripe.subscriptions.update(sub.id, { metadata }, o));
        else await this.req('customer.update', (o) => this.o.stripe.customers.update(customer!.id, { metadata }, o));
      }
      this.note(sub ? 'burst.subscription' : 'burst.customer', true);
    });
    return true;
  }
}

export function stripeBilling(options: StripeTrafficOptions): TrafficActor {
  return new BillingTraffic(options);
}
