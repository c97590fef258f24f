/**
 * A platform's connected accounts, driven through the official client with `Stripe-Account`
 * straight at the upstream: accounts connected (a few at the start, one more later), and in
 * each a product whose id every account uses (`gold`, so ids chosen alike must stay apart in
 * the database), prices, customers with a card, subscriptions, renames, cancellations and
 * deletions; once, an account is deleted with everything in it. Seeded like the billing
 * traffic; paced to `maxRequestsPerSecond`, which the caller counts against the platform's
 * limit (Stripe counts a connected account's requests there).
 */
import type Stripe from 'stripe';
import { pause } from '../../src/time.ts';
import type { Random } from '../random.ts';
import { OpCounts, type TrafficActor } from '../types.ts';

export interface StripeConnectOptions {
  stripe: Stripe;
  random: Random;
  log(message: string): void;
  maxRequestsPerSecond: number;
}

const FIRST_ACCOUNTS = 2;
const MAX_ACCOUNTS = 4;
const MAX_CUSTOMERS = 12;
const REQUEST_TIMEOUT_MS = 20_000;

const WEIGHTS = { connect: 1, signup: 6, subscribe: 4, cancel: 2, rename: 4, renameProduct: 2, deleteCustomer: 1, removeAccount: 1 };
type Op = keyof typeof WEIGHTS;

interface Connected {
  id: string;
  price?: string;
  customers: string[];
  subscriptions: string[];
}

class ConnectTraffic implements TrafficActor {
  readonly name = 'stripe connected accounts';
  readonly counts = new OpCounts();
  doing: string | undefined;
  private readonly accounts: Connected[] = [];
  private removed = false;
  private last = 0;

  constructor(private readonly options: StripeConnectOptions) {}

  async run(signal: AbortSignal): Promise<void> {
    for (let i = 0; i < FIRST_ACCOUNTS && !signal.aborted; i++) await this.step('connect', signal);
    while (!signal.aborted) await this.step(this.options.random.weighted(WEIGHTS) as Op, signal);
  }

  /**
   * One request at most every 1/maxRequestsPerSecond s, with a tenth to spare (as Stripe counts
   * arrivals, two requests a second apart may fall in one second); a refusal counts.
   */
  private async call<T>(kind: string, signal: AbortSignal, request: () => Promise<T>): Promise<T | undefined> {
    const gap = this.last + 1100 / this.options.maxRequestsPerSecond - Date.now();
    if (gap > 0) await pause(gap, signal);
    if (signal.aborted) return undefined;
    this.last = Date.now();
    this.doing = kind;
    try {
      const answer = await request();
      this.counts.ok(kind);
      return answer;
    } catch (error) {
      const status = (error as Stripe.errors.StripeError).statusCode;
      this.counts.no(status === 429 ? 'rate_limited' : status && status < 500 ? kind : 'upstream_error');
      return undefined;
    } finally {
      this.doing = undefined;
    }
  }

  private pick<T>(items: T[]): T | undefined {
    return items.length === 0 ? undefined : items[this.options.random.int(items.length)];
  }

  private async step(op: Op, signal: AbortSignal): Promise<void> {
    const { stripe } = this.options;
    const opts = (a: Connected) => ({ stripeAccount: a.id, timeout: REQUEST_TIMEOUT_MS });
    const account = this.pick(this.accounts);
    switch (op) {
      case 'connect': {
        if (this.accounts.length >= MAX_ACCOUNTS) return;
        const made = await this.call('connect', signal, () =>
          stripe.accounts.create({ type: 'custom', email: `owner${this.accounts.length}@shop.example.com` }),
        );
        if (!made) return;
        const a: Connected = { id: made.id, customers: [], subscriptions: [] };
        this.accounts.push(a);
        // Every account sells a `gold` of its own.
        const product = await this.call('product', signal, () => stripe.products.create({ id: 'gold', name: `Gold of ${made.id.slice(-4)}` }, opts(a)));
        if (!product) return;
        const price = await this.call('price', signal, () =>
          stripe.prices.create({ product: 'gold', currency: 'usd', unit_amount: 1500 + 100 * this.accounts.length, recurring: { interval: 'month' } }, opts(a)),
        );
        a.price = price?.id;
        this.options.log(`connected account ${made.id} made`);
        return;
      }
      case 'signup': {
        if (!account || account.customers.length >= MAX_CUSTOMERS) return;
        const card = await this.call('card', signal, () => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_visa' } }, opts(account)));
        if (!card) return;
        const email = `c${this.options.random.int(1e6)}@${account.id.slice(-6).toLowerCase()}.example.com`;
        const customer = await this.call('signup', signal, () =>
          stripe.customers.create({ email, payment_method: card.id, invoice_settings: { default_payment_method: card.id } }, opts(account)),
        );
        if (customer) account.customers.push(customer.id);
        return;
      }
      case 'subscribe': {
        const customer = account && this.pick(account.customers);
        if (!account?.price || !customer) return;
        const sub = await this.call('subscribe', signal, () => stripe.subscriptions.create({ customer, items: [{ price: account.price! }] }, opts(account)));
        if (sub) account.subscriptions.push(sub.id);
        return;
      }
      case 'cancel': {
        const sub = account && this.pick(account.subscriptions);
        if (!account || !sub) return;
        account.subscriptions = account.subscriptions.filter((s) => s !== sub);
        await this.call('cancel', signal, () => stripe.subscriptions.cancel(sub, {}, opts(account)));
        return;
      }
      case 'rename': {
        const customer = account && this.pick(account.customers);
        if (!account || !customer) return;
        await this.call('rename', signal, () => stripe.customers.update(customer, { name: `Name ${this.options.random.int(1000)}` }, opts(account)));
        return;
      }
      case 'renameProduct': {
        if (!account) return;
        await this.call('renameProduct', signal, () => stripe.products.update('gold', { name: `Gold ${this.options.random.int(1000)}` }, opts(account)));
        return;
      }
      case 'deleteCustomer': {
        const customer = account && this.pick(account.customers);
        if (!account || !customer) return;
        account.customers = account.customers.filter((c) => c !== customer);
        await this.call('deleteCustomer', signal, () => stripe.customers.del(customer, {}, opts(account)));
        return;
      }
      case 'removeAccount': {
        // Once, and only with others left: an account deleted with all it holds.
        if (this.removed || !account || this.accounts.length < FIRST_ACCOUNTS + 1) return;
        this.removed = true;
        const gone = await this.call('removeAccount', signal, () => stripe.accounts.del(account.id, {}, { timeout: REQUEST_TIMEOUT_MS }));
        if (!gone) return;
        this.accounts.splice(this.accounts.indexOf(account), 1);
        this.options.log(`connected account ${account.id} deleted`);
        return;
      }
    }
  }
}

export function stripeConnected(options: StripeConnectOptions): TrafficActor {
  return new ConnectTraffic(options);
}
