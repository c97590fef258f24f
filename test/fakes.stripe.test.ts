/**
 * The fake Stripe over real HTTP: the official stripe client (23.1.0, pinned to the product's
 * API version) for what it can do, raw fetch for headers, auth and malformed requests.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Stripe from 'stripe';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe, type StripeObject } from '../fakes/stripe/index.ts';
import { objectFields } from '../fakes/stripe/spec/index.ts';

const API_VERSION = '2026-08-26.dahlia';
const KEY = 'sk_test_51TestKey0000000000000000abcd';
const ACCOUNT = 'acct_1TestAccount00001';
const RESTRICTED = 'rk_test_51Restricted00000000000wxyz';

let fake: FakeStripe;
let account: FakeStripeAccount;
let stripe: Stripe;

function client(key = KEY, on: FakeStripe = fake, extra: Record<string, unknown> = {}): Stripe {
  return new Stripe(key, { host: '127.0.0.1', port: on.port, protocol: 'http', apiVersion: API_VERSION as never, maxNetworkRetries: 0, ...extra });
}

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed answer; loosely typed because tests probe arbitrary JSON shapes (not data-path code). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

async function call(
  method: string,
  path: string,
  opts: { key?: string | null; form?: string; headers?: Record<string, string>; on?: FakeStripe } = {},
): Promise<Reply> {
  const target = opts.on ?? fake;
  const headers: Record<string, string> = { 'stripe-version': API_VERSION, ...(opts.headers ?? {}) };
  const key = opts.key === undefined ? KEY : opts.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (opts.form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
  const res = await fetch(`${target.url}${path}`, { method, headers, body: opts.form });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** The StripeError a promise rejects with (fails the test when it resolves). */
async function rejection(p: Promise<unknown>): Promise<Stripe.errors.StripeError> {
  try {
    await p;
  } catch (e) {
    assert.instance(e, Stripe.errors.StripeError);
    return e as Stripe.errors.StripeError;
  }
  assert.unreachable('expected the request to fail');
  throw new Error('unreachable');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test.before(async () => {
  fake = await startFakeStripe({ rateLimit: false });
  account = fake.createAccount({ id: ACCOUNT });
  fake.addKey(KEY, { account: ACCOUNT });
  fake.addKey(RESTRICTED, { account: ACCOUNT, restricted: { read: ['products', 'rak_price_read'], write: ['customer'] } });
  stripe = client();
});

test.after(async () => {
  await fake.close();
});

test('customers: create, retrieve, update, list, delete, with their events', async () => {
  const created = await stripe.customers.create({
    email: 'ada@example.com',
    name: 'Ada',
    metadata: { plan: 'gold', team: 'a' },
    address: { city: 'London', country: 'GB' },
  });
  assert.match(created.id, /^cus_[0-9A-Za-z]{14}$/);
  assert.is(created.object, 'customer');
  assert.is(created.email, 'ada@example.com');
  assert.equal(created.address, { city: 'London', country: 'GB', line1: null, line2: null, postal_code: null, state: null });
  assert.equal(created.metadata, { plan: 'gold', team: 'a' });
  assert.is(created.livemode, false);
  assert.is(created.balance, 0);
  assert.match(created.invoice_prefix ?? '', /^[0-9A-Z]{8}$/);
  assert.ok(Math.abs(created.created - Math.floor(Date.now() / 1000)) < 5);

  const before = account.count('customers');
  const badCard = await rejection(stripe.customers.create({ email: 'x@example.com', payment_method: 'pm_missing0000000000000000' }));
  assert.equal([badCard.statusCode, badCard.message], [404, "No such PaymentMethod: 'pm_missing0000000000000000'"]);
  assert.is(account.count('customers'), before, 'a failed create stores nothing');

  const fetched = await stripe.customers.retrieve(created.id);
  assert.equal(fetched, created);

  const updated = await stripe.customers.update(created.id, {
    name: 'Ada Lovelace',
    metadata: { plan: 'platinum', team: '', added: 'x' },
    description: 'first',
  });
  assert.is(updated.name, 'Ada Lovelace');
  assert.equal(updated.metadata, { plan: 'platinum', added: 'x' });
  assert.is(updated.description, 'first');
  const cleared = await stripe.customers.update(created.id, { description: '' });
  assert.is(cleared.description, null);

  const events = await stripe.events.list({ types: ['customer.created', 'customer.updated'], limit: 10 });
  const mine = events.data.filter((e) => (e.data.object as { id: string }).id === created.id);
  assert.equal(
    mine.map((e) => e.type),
    ['customer.updated', 'customer.updated', 'customer.created'],
  );
  const [second, first, creation] = mine as [Stripe.Event, Stripe.Event, Stripe.Event];
  assert.equal(first.data.previous_attributes, { name: 'Ada', metadata: { plan: 'gold', team: 'a', added: null }, description: null });
  assert.equal(second.data.previous_attributes, { description: 'first' });
  assert.is((creation.data.object as Stripe.Customer).email, 'ada@example.com');
  assert.is(creation.data.previous_attributes, undefined);
  assert.is(creation.api_version, API_VERSION);
  assert.match(creation.request?.id ?? '', /^req_/);
  assert.is(creation.pending_webhooks, 0);
  assert.match(first.id, /^evt_1/);

  const deleted = await stripe.customers.del(created.id);
  assert.equal({ ...deleted }, { id: created.id, object: 'customer', deleted: true });
  const stub = await stripe.customers.retrieve(created.id);
  assert.is((stub as Stripe.DeletedCustomer).deleted, true);
  const deletedEvent = (await stripe.events.list({ type: 'customer.deleted', limit: 1 })).data[0];
  assert.is(deletedEvent?.type, 'customer.deleted');
  assert.is((deletedEvent!.data.object as Stripe.Customer).name, 'Ada Lovelace', 'the full object before deletion');
  const listed = await stripe.customers.list({ limit: 100 });
  assert.not.ok(
    listed.data.some((c) => c.id === created.id),
    'deleted customers are not listed',
  );
  const err = await rejection(stripe.customers.update(created.id, { name: 'x' }));
  assert.is(err.statusCode, 404);
  assert.is(err.code, 'resource_missing');
  assert.is(err.message, `No such customer: '${created.id}'`);
});

test('products, prices and plans share objects; prices cannot be deleted, products with prices neither', async () => {
  const product = await stripe.products.create({
    name: 'Widget',
    default_price_data: { currency: 'usd', unit_amount: 1500, recurring: { interval: 'month' } },
  });
  assert.match(product.id, /^prod_/);
  assert.match(String(product.default_price), /^price_1/);
  const price = await stripe.prices.retrieve(String(product.default_price));
  assert.is(price.unit_amount, 1500);
  assert.is(String(price.unit_amount_decimal), '1500', 'stripe-node wraps decimals');
  assert.equal(price.recurring, { interval: 'month', interval_count: 1, meter: null, usage_type: 'licensed' });
  assert.is(price.type, 'recurring');
  assert.is(price.product, product.id);
  const plan = await stripe.plans.retrieve(price.id);
  assert.is(plan.object, 'plan');
  assert.is(plan.amount, 1500);
  assert.is(plan.interval, 'month');

  const oneTime = await stripe.prices.create({ currency: 'usd', unit_amount: 999, product: product.id, lookup_key: 'widget_once' });
  assert.is(oneTime.type, 'one_time');
  const byKey = await stripe.prices.list({ lookup_keys: ['widget_once'] });
  assert.equal(
    byKey.data.map((p) => p.id),
    [oneTime.id],
  );
  const recurringOnly = await stripe.prices.list({ product: product.id, type: 'recurring' });
  assert.equal(
    recurringOnly.data.map((p) => p.id),
    [price.id],
  );
  const plans = await stripe.plans.list({ product: product.id });
  assert.equal(
    plans.data.map((p) => p.id),
    [price.id],
    'one-time prices are not plans',
  );

  const dup = await rejection(stripe.prices.create({ currency: 'usd', unit_amount: 1, product: product.id, lookup_key: 'widget_once' }));
  assert.is(dup.statusCode, 400);
  assert.is(dup.param, 'lookup_key');

  const noDelete = await call('DELETE', `/v1/prices/${price.id}`);
  assert.is(noDelete.status, 404);
  assert.is(
    noDelete.json.error.message,
    `Unrecognized request URL (DELETE: /v1/prices/${price.id}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
  );
  const withPrices = await rejection(stripe.products.del(product.id));
  assert.is(withPrices.message, 'This product cannot be deleted because it has one or more user-created prices.');

  const updated = await stripe.prices.update(price.id, { nickname: 'Monthly', active: false });
  assert.is(updated.nickname, 'Monthly');
  const types = (await stripe.events.list({ limit: 3 })).data.map((e) => e.type);
  assert.equal(types.slice(0, 2).sort(), ['plan.updated', 'price.updated']);

  const planOnly = await stripe.plans.create({ id: 'gold-yearly', amount: 50000, currency: 'usd', interval: 'year', product: { name: 'Gold' } });
  assert.is(planOnly.id, 'gold-yearly');
  assert.is((await stripe.prices.retrieve('gold-yearly')).unit_amount, 50000);
  const gone = await stripe.plans.del('gold-yearly');
  assert.equal({ ...gone }, { id: 'gold-yearly', object: 'plan', deleted: true });
  assert.is((await rejection(stripe.plans.retrieve('gold-yearly'))).code, 'resource_missing');

  const bare = await stripe.products.create({ name: 'Deletable' });
  const bareGone = await stripe.products.del(bare.id);
  assert.is(bareGone.deleted, true);
  const productDeleted = (await stripe.events.list({ type: 'product.deleted', limit: 1 })).data[0];
  assert.is((productDeleted!.data.object as Stripe.Product).name, 'Deletable');
});

test('coupons: create, update, delete', async () => {
  const coupon = await stripe.coupons.create({ percent_off: 25, duration: 'repeating', duration_in_months: 3, name: 'Spring' });
  assert.match(coupon.id, /^[0-9A-Z]{8}$/);
  assert.is(coupon.percent_off, 25);
  assert.is(coupon.valid, true);
  const named = await stripe.coupons.create({ id: 'WELCOME10', amount_off: 1000, currency: 'usd' });
  assert.is(named.duration, 'once');
  const renamed = await stripe.coupons.update('WELCOME10', { name: 'Welcome' });
  assert.is(renamed.name, 'Welcome');
  const bad = await rejection(stripe.coupons.create({ duration: 'once' }));
  assert.is(bad.statusCode, 400);
  assert.ok((await stripe.coupons.del('WELCOME10')).deleted);
});

test('entitlement features: create, retrieve, update, list by lookup_key and archived; shaped as Stripe shows them', async () => {
  const seats = await stripe.entitlements.features.create({ name: 'Seats', lookup_key: 'seats_fx', metadata: { tier: 'pro' } });
  assert.match(seats.id, /^feat_/);
  assert.equal(Object.keys(seats).sort(), [...objectFields('entitlements.feature')!.props].sort(), 'the spec’s fields, no more');
  assert.is(seats.object, 'entitlements.feature');
  assert.is(seats.active, true);
  const duplicate = await rejection(stripe.entitlements.features.create({ name: 'Again', lookup_key: 'seats_fx' }));
  assert.is(duplicate.statusCode, 400);
  assert.is(duplicate.param, 'lookup_key');
  const keyless = await rejection(stripe.entitlements.features.create({ name: 'No key' } as never));
  assert.is(keyless.statusCode, 400);
  const sso = await stripe.entitlements.features.create({ name: 'SSO', lookup_key: 'sso_fx' });
  const archived = await stripe.entitlements.features.update(sso.id, { active: false, name: 'Single sign-on' });
  assert.is(archived.active, false);
  assert.is(archived.name, 'Single sign-on');
  assert.is((await stripe.entitlements.features.retrieve(seats.id)).metadata.tier, 'pro');
  const live = (await stripe.entitlements.features.list({ archived: false, limit: 100 })).data.map((f) => f.id);
  assert.ok(live.includes(seats.id) && !live.includes(sso.id), 'archived=false leaves archived features out');
  assert.equal(
    (await stripe.entitlements.features.list({ lookup_key: 'sso_fx' })).data.map((f) => f.id),
    [sso.id],
  );
  const unknown = await rejection(stripe.entitlements.features.retrieve('feat_nosuch'));
  assert.is(unknown.statusCode, 404);
});

/** A customer with a default card, and a monthly price. */
async function billable(amount = 2000): Promise<{ customer: Stripe.Customer; price: Stripe.Price; pm: string }> {
  const customer = await stripe.customers.create({ email: 'buyer@example.com', payment_method: 'pm_card_visa' });
  const pms = await stripe.customers.listPaymentMethods(customer.id);
  const pm = (pms.data[0] as Stripe.PaymentMethod).id;
  await stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: pm } });
  const price = await stripe.prices.create({
    currency: 'usd',
    unit_amount: amount,
    recurring: { interval: 'month' },
    product_data: { name: `Plan ${amount}` },
  });
  return { customer, price, pm };
}

test('subscriptions: the first invoice is paid with the default card; items change; cancel keeps it listable', async () => {
  const { customer, price, pm } = await billable(2000);
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: price.id, quantity: 2 }], expand: ['latest_invoice.payments'] });
  assert.match(sub.id, /^sub_1/);
  assert.is(sub.status, 'active');
  assert.is(sub.items.data.length, 1);
  const item = sub.items.data[0] as Stripe.SubscriptionItem;
  assert.is(item.quantity, 2);
  assert.is(item.price.id, price.id);
  assert.ok(item.current_period_end > item.current_period_start + 27 * 86_400);
  const invoice = sub.latest_invoice as Stripe.Invoice;
  assert.is(invoice.status, 'paid');
  assert.is(invoice.amount_paid, 4000);
  assert.is(invoice.billing_reason, 'subscription_create');
  assert.is(invoice.parent?.subscription_details?.subscription, sub.id);
  assert.match(invoice.number ?? '', new RegExp(`^${customer.invoice_prefix}-0001$`));
  assert.is(invoice.lines.data[0]?.amount, 4000);
  assert.match(invoice.lines.data[0]?.description ?? '', /^2 × Plan 2000 \(at \$20\.00 \/ month\)$/);
  const payment = invoice.payments?.data[0];
  assert.ok(payment, 'invoice.payments expands');
  const pi = await stripe.paymentIntents.retrieve(String(payment.payment.payment_intent));
  assert.is(pi.status, 'succeeded');
  assert.is(pi.payment_method, pm);
  const charge = await stripe.charges.retrieve(String(pi.latest_charge), { expand: ['balance_transaction'] });
  assert.is(charge.amount, 4000);
  const txn = charge.balance_transaction as Stripe.BalanceTransaction;
  assert.equal([txn.amount, txn.fee, txn.net, txn.type], [4000, 146, 3854, 'charge']);
  const created = await stripe.events.list({ limit: 30 });
  const types: string[] = created.data.map((e) => e.type);
  for (const t of [
    'customer.subscription.created',
    'customer.subscription.updated',
    'invoice.created',
    'invoice.finalized',
    'invoice.paid',
    'invoice.payment_succeeded',
    'payment_intent.succeeded',
    'charge.succeeded',
    'invoice_payment.paid',
  ]) {
    assert.ok(types.includes(t), t);
  }

  const added = await stripe.subscriptionItems.create({
    subscription: sub.id,
    price: (await stripe.prices.create({ currency: 'usd', unit_amount: 500, recurring: { interval: 'month' }, product_data: { name: 'Add-on' } })).id,
  });
  const withTwo = await stripe.subscriptions.retrieve(sub.id);
  assert.equal(
    withTwo.items.data.map((i) => i.id),
    [item.id, added.id],
  );
  const updatedEvent = (await stripe.events.list({ type: 'customer.subscription.updated', limit: 1 })).data[0];
  assert.equal(
    (updatedEvent!.data.previous_attributes as { items: Stripe.ApiList<Stripe.SubscriptionItem> }).items.data.map((i) => i.id),
    [item.id],
  );
  const listedItems = await stripe.subscriptionItems.list({ subscription: sub.id });
  assert.is(listedItems.data.length, 2);
  const missing = await rejection(stripe.subscriptionItems.list({} as Stripe.SubscriptionItemListParams));
  assert.is(missing.code, 'parameter_missing');
  await stripe.subscriptions.update(sub.id, {
    items: [
      { id: item.id, quantity: 3 },
      { id: added.id, deleted: true },
    ],
    metadata: { seats: '3' },
  });
  const after = await stripe.subscriptions.retrieve(sub.id);
  assert.equal(
    after.items.data.map((i) => [i.id, i.quantity]),
    [[item.id, 3]],
  );
  assert.equal(after.metadata, { seats: '3' });
  const lastItem = await rejection(stripe.subscriptionItems.del(item.id));
  assert.match(lastItem.message, /at least one active plan/);
  const mixed = await rejection(stripe.subscriptions.update(sub.id, { items: [{ id: item.id, deleted: true }, { price: 'price_missing000000000000' }] }));
  assert.is(mixed.code, 'resource_missing');
  assert.equal(
    (await stripe.subscriptions.retrieve(sub.id)).items.data.map((i) => i.id),
    [item.id],
    'a failed update changes nothing',
  );

  const canceled = await stripe.subscriptions.cancel(sub.id);
  assert.is(canceled.status, 'canceled');
  assert.ok(canceled.canceled_at);
  assert.is(canceled.cancellation_details?.reason, 'cancellation_requested');
  const deletedEvent = (await stripe.events.list({ type: 'customer.subscription.deleted', limit: 1 })).data[0];
  assert.is((deletedEvent!.data.object as Stripe.Subscription).id, sub.id);
  const active = await stripe.subscriptions.list({ customer: customer.id });
  assert.equal(active.data.length, 0, 'the default list hides canceled subscriptions');
  const all = await stripe.subscriptions.list({ customer: customer.id, status: 'all' });
  assert.equal(
    all.data.map((s) => s.id),
    [sub.id],
  );
  const onlyCanceled = await stripe.subscriptions.list({ status: 'canceled', customer: customer.id });
  assert.equal(
    onlyCanceled.data.map((s) => s.status),
    ['canceled'],
  );
  assert.is((await stripe.subscriptions.retrieve(sub.id)).status, 'canceled');
});

test('subscriptions without a card stay incomplete with an open invoice; send_invoice ones are active', async () => {
  const customer = await stripe.customers.create({ email: 'nocard@example.com' });
  const price = await stripe.prices.create({ currency: 'usd', unit_amount: 1000, recurring: { interval: 'month' }, product_data: { name: 'Basic' } });
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: price.id }], expand: ['latest_invoice'] });
  assert.is(sub.status, 'incomplete');
  assert.is((sub.latest_invoice as Stripe.Invoice).status, 'open');
  const invoiced = await stripe.subscriptions.create({
    customer: customer.id,
    items: [{ price: price.id }],
    collection_method: 'send_invoice',
    days_until_due: 30,
    expand: ['latest_invoice'],
  });
  assert.is(invoiced.status, 'active');
  const inv = invoiced.latest_invoice as Stripe.Invoice;
  assert.is(inv.status, 'open');
  assert.is(inv.due_date, inv.created + 30 * 86_400);
  const oneTime = await stripe.prices.create({ currency: 'usd', unit_amount: 100, product_data: { name: 'Once' } });
  const wrong = await rejection(stripe.subscriptions.create({ customer: customer.id, items: [{ price: oneTime.id }] }));
  assert.is(wrong.param, 'items[0][price]');
  assert.match(wrong.message, /type=one_time/);
});

test('invoices: items, draft, finalize, pay, lines, delete, void', async () => {
  const { customer } = await billable(100);
  const pending = await stripe.invoiceItems.create({ customer: customer.id, amount: 2500, currency: 'usd', description: 'Setup' });
  assert.match(pending.id, /^ii_1/);
  assert.is(pending.invoice, null);
  const draft = await stripe.invoices.create({ customer: customer.id, pending_invoice_items_behavior: 'include', description: 'March' });
  assert.is(draft.status, 'draft');
  assert.is(draft.amount_due, 2500);
  assert.is((await stripe.invoiceItems.retrieve(pending.id)).invoice, draft.id);
  const extra = await stripe.invoiceItems.create({ customer: customer.id, invoice: draft.id, amount: 500, currency: 'usd', description: 'Extra' });
  const withExtra = await stripe.invoices.retrieve(draft.id);
  assert.is(withExtra.total, 3000);
  assert.equal(
    withExtra.lines.data.map((l) => l.description),
    ['Setup', 'Extra'],
  );
  const lines = await stripe.invoices.listLineItems(draft.id, { limit: 1 });
  assert.is(lines.data.length, 1);
  assert.is(lines.has_more, true);
  assert.is(lines.url, `/v1/invoices/${draft.id}/lines`);
  await stripe.invoiceItems.del(extra.id);
  assert.is((await stripe.invoices.retrieve(draft.id)).total, 2500);

  const finalized = await stripe.invoices.finalizeInvoice(draft.id);
  assert.is(finalized.status, 'open');
  assert.ok(finalized.number);
  assert.match(finalized.hosted_invoice_url ?? '', /^https:\/\/invoice\.stripe\.com\/i\/acct_/);
  const frozen = await rejection(stripe.invoiceItems.update(pending.id, { amount: 1 }));
  assert.is(frozen.statusCode, 400);
  const paid = await stripe.invoices.pay(draft.id);
  assert.is(paid.status, 'paid');
  assert.is(paid.amount_remaining, 0);
  const payments = await stripe.invoicePayments.list({ invoice: draft.id });
  assert.is(payments.data[0]?.amount_paid, 2500);
  const again = await rejection(stripe.invoices.pay(draft.id));
  assert.is(again.statusCode, 400);

  const throwaway = await stripe.invoices.create({ customer: customer.id });
  const gone = await stripe.invoices.del(throwaway.id);
  assert.is(gone.deleted, true);
  const deletedEvent = (await stripe.events.list({ type: 'invoice.deleted', limit: 1 })).data[0];
  assert.is((deletedEvent!.data.object as Stripe.Invoice).id, throwaway.id);
  const toVoid = await stripe.invoices.finalizeInvoice(
    (await stripe.invoices.create({ customer: customer.id, collection_method: 'send_invoice', days_until_due: 7 })).id,
  );
  assert.is(toVoid.amount_due, 0);
  assert.is(toVoid.status, 'paid', 'an empty invoice is paid when finalized');
  const open = await stripe.invoiceItems.create({ customer: customer.id, amount: 700, currency: 'usd' });
  const second = await stripe.invoices.create({
    customer: customer.id,
    pending_invoice_items_behavior: 'include',
    collection_method: 'send_invoice',
    days_until_due: 7,
  });
  assert.is(second.amount_due, 700, String(open.id));
  await stripe.invoices.finalizeInvoice(second.id);
  const voided = await stripe.invoices.voidInvoice(second.id);
  assert.is(voided.status, 'void');
  const listed = await stripe.invoices.list({ customer: customer.id, status: 'void' });
  assert.equal(
    listed.data.map((i) => i.id),
    [second.id],
  );
});

test('payment intents: confirm charges the card; declines are 402 card errors; manual capture; refunds', async () => {
  const customer = await stripe.customers.create({ name: 'Payer' });
  const pi = await stripe.paymentIntents.create({
    amount: 5000,
    currency: 'usd',
    customer: customer.id,
    payment_method: 'pm_card_mastercard',
    confirm: true,
    metadata: { order: '42' },
  });
  assert.is(pi.status, 'succeeded');
  assert.is(pi.amount_received, 5000);
  assert.match(pi.client_secret ?? '', new RegExp(`^${pi.id}_secret_`));
  const charge = await stripe.charges.retrieve(String(pi.latest_charge));
  assert.is(charge.payment_method_details?.card?.brand, 'mastercard');
  assert.is(charge.payment_method_details?.card?.last4, '4444');
  assert.is(charge.status, 'succeeded');
  assert.is(charge.customer, customer.id);
  const byIntent = await stripe.charges.list({ payment_intent: pi.id });
  assert.equal(
    byIntent.data.map((c) => c.id),
    [charge.id],
  );

  const declined = await rejection(stripe.paymentIntents.create({ amount: 1000, currency: 'usd', payment_method: 'pm_card_chargeDeclined', confirm: true }));
  assert.is(declined.statusCode, 402);
  assert.is(declined.type, 'StripeCardError');
  assert.is(declined.code, 'card_declined');
  assert.is(declined.decline_code, 'generic_decline');
  const failedPi = declined.payment_intent as Stripe.PaymentIntent;
  assert.is(failedPi.status, 'requires_payment_method');
  assert.is(failedPi.last_payment_error?.code, 'card_declined');
  assert.is((await stripe.charges.retrieve(String(failedPi.latest_charge))).status, 'failed');

  const manual = await stripe.paymentIntents.create({ amount: 3000, currency: 'usd', payment_method: 'pm_card_visa', capture_method: 'manual', confirm: true });
  assert.is(manual.status, 'requires_capture');
  const captured = await stripe.paymentIntents.capture(manual.id, { amount_to_capture: 2000 });
  assert.is(captured.status, 'succeeded');
  assert.is(captured.amount_received, 2000);

  const partial = await stripe.refunds.create({ payment_intent: pi.id, amount: 1500, reason: 'requested_by_customer' });
  assert.match(partial.id, /^re_1/);
  assert.is(partial.status, 'succeeded');
  assert.is(partial.charge, charge.id);
  const refundTxn = await stripe.balanceTransactions.retrieve(String(partial.balance_transaction));
  assert.equal([refundTxn.amount, refundTxn.type, refundTxn.source], [-1500, 'refund', partial.id]);
  let after = await stripe.charges.retrieve(charge.id);
  assert.equal([after.amount_refunded, after.refunded], [1500, false]);
  const refundedEvent = (await stripe.events.list({ type: 'charge.refunded', limit: 1 })).data[0];
  assert.equal(refundedEvent?.data.previous_attributes, { amount_refunded: 0 });
  const tooMuch = await rejection(stripe.refunds.create({ charge: charge.id, amount: 4000 }));
  assert.is(tooMuch.message, 'Refund amount ($40.00) is greater than unrefunded amount on charge ($35.00)');
  await stripe.refunds.create({ charge: charge.id });
  after = await stripe.charges.retrieve(charge.id, { expand: ['refunds'] });
  assert.equal([after.amount_refunded, after.refunded, after.refunds?.data.length], [5000, true, 2]);
  const already = await rejection(stripe.refunds.create({ charge: charge.id }));
  assert.is(already.code, 'charge_already_refunded');
  const refunds = await stripe.refunds.list({ charge: charge.id });
  assert.is(refunds.data.length, 2);
});

test('payment methods: attach, list per customer, detach', async () => {
  const customer = await stripe.customers.create({ email: 'cards@example.com' });
  const pm = await stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_amex' }, billing_details: { name: 'Card Holder' } });
  assert.is(pm.customer, null);
  assert.is(pm.card?.brand, 'amex');
  assert.is(pm.card?.display_brand, 'american_express');
  const attached = await stripe.paymentMethods.attach(pm.id, { customer: customer.id });
  assert.is(attached.customer, customer.id);
  const listed = await stripe.customers.listPaymentMethods(customer.id, { type: 'card' });
  assert.equal(
    listed.data.map((p) => p.id),
    [pm.id],
  );
  assert.is(listed.url, `/v1/customers/${customer.id}/payment_methods`);
  const twice = await rejection(stripe.paymentMethods.attach(pm.id, { customer: (await stripe.customers.create({})).id }));
  assert.is(twice.code, 'payment_method_unexpected_state');
  const detached = await stripe.paymentMethods.detach(pm.id);
  assert.is(detached.customer, null);
  const pmEvents = (await stripe.events.list({ type: 'payment_method.*', limit: 2 })).data;
  assert.equal(
    pmEvents.map((e) => e.type),
    ['payment_method.detached', 'payment_method.attached'],
  );
  assert.equal(pmEvents[0]?.data.previous_attributes, { customer: customer.id });
  const raw = await rejection(stripe.paymentMethods.create({ type: 'card', card: { number: '4242424242424242', exp_month: 1, exp_year: 2030 } }));
  assert.match(raw.message, /Sending credit card numbers directly/);
});

test('checkout sessions: create, line items, expire, complete through the control API', async () => {
  const price = await stripe.prices.create({ currency: 'usd', unit_amount: 1200, product_data: { name: 'Poster' } });
  const session = await stripe.checkout.sessions.create({
    mode: 'payment',
    line_items: [{ price: price.id, quantity: 2 }],
    success_url: 'https://example.com/ok',
    customer_email: 'guest@example.com',
  });
  assert.match(session.id, /^cs_test_/);
  assert.is(session.amount_total, 2400);
  assert.is(session.status, 'open');
  assert.match(session.url ?? '', /^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
  const items = await stripe.checkout.sessions.listLineItems(session.id);
  assert.equal(
    items.data.map((i) => [i.description, i.quantity, i.amount_total]),
    [['Poster', 2, 2400]],
  );
  const completed = account.act('checkout/sessions', session.id, 'complete', { payment_method: 'pm_card_visa' });
  assert.is(completed.status, 'complete');
  assert.is(completed.payment_status, 'paid');
  const pi = await stripe.paymentIntents.retrieve(String(completed.payment_intent));
  assert.equal([pi.status, pi.amount], ['succeeded', 2400]);
  assert.is((await stripe.events.list({ limit: 1 })).data[0]?.type, 'checkout.session.completed');
  const other = await stripe.checkout.sessions.create({ mode: 'payment', line_items: [{ price: price.id }], success_url: 'https://example.com/ok' });
  const expired = await stripe.checkout.sessions.expire(other.id);
  assert.is(expired.status, 'expired');
  const listed = await stripe.checkout.sessions.list({ status: 'expired', limit: 100 });
  assert.ok(listed.data.some((s) => s.id === other.id));
  const recurring = await stripe.prices.create({ currency: 'usd', unit_amount: 800, recurring: { interval: 'month' }, product_data: { name: 'Club' } });
  const subSession = await stripe.checkout.sessions.create({
    mode: 'subscription',
    line_items: [{ price: recurring.id, quantity: 1 }],
    success_url: 'https://example.com/ok',
  });
  const done = account.act('checkout/sessions', subSession.id, 'complete', { email: 'member@example.com' });
  const sub = await stripe.subscriptions.retrieve(String(done.subscription));
  assert.is(sub.status, 'active');
  assert.is(((await stripe.customers.retrieve(String(done.customer))) as Stripe.Customer).email, 'member@example.com');
  const wrongMode = await rejection(
    stripe.checkout.sessions.create({ mode: 'payment', line_items: [{ price: recurring.id }], success_url: 'https://example.com/ok' }),
  );
  assert.match(wrongMode.message, /recurring price/);
});

test('lists: limit, cursors both ways, created ranges, auto-pagination, expand', async () => {
  const other = fake.createAccount();
  const key = 'sk_test_pagination000000000001';
  fake.addKey(key, { account: other.id });
  const s = client(key);
  const base = fake.clock.now() - 1000;
  for (let i = 0; i < 250; i++) other.create('customers', { email: `c${i}@example.com`, metadata: { i: String(i) } });
  const all = await s.customers.list({ limit: 100 }).autoPagingToArray({ limit: 1000 });
  assert.is(all.length, 250);
  assert.equal(
    all.map((c) => c.id),
    other.all('customers').map((c) => c.id),
    'newest first, same order as the store',
  );
  assert.is(new Set(all.map((c) => c.id)).size, 250);
  assert.is(all[0]?.email, 'c249@example.com', 'same second: the later one first');
  const page1 = await s.customers.list({ limit: 3 });
  const page2 = await s.customers.list({ limit: 3, starting_after: page1.data[2]?.id });
  assert.equal(
    page2.data.map((c) => c.email),
    ['c246@example.com', 'c245@example.com', 'c244@example.com'],
  );
  const back = await s.customers.list({ limit: 3, ending_before: page2.data[0]?.id });
  assert.equal(
    back.data.map((c) => c.id),
    page1.data.map((c) => c.id),
  );
  assert.is(back.has_more, false);
  const none = await s.customers.list({ created: { lt: base } });
  assert.equal(none.data, []);
  assert.is(none.url, '/v1/customers');
  const some = await s.customers.list({ created: { gte: base }, limit: 5 });
  assert.is(some.data.length, 5);
  assert.is(some.has_more, true);
  const over = await rejection(s.customers.list({ limit: 101 }));
  assert.is(over.statusCode, 400);
  assert.is(over.param, 'limit');
  const badCursor = await rejection(s.customers.list({ starting_after: 'cus_doesnotexist00' }));
  assert.is(badCursor.statusCode, 404);
  const both = await rejection(s.customers.list({ starting_after: page1.data[0]?.id, ending_before: page1.data[1]?.id }));
  assert.is(both.statusCode, 400);

  const sub = await stripe.subscriptions.list({ limit: 1, status: 'all', expand: ['data.customer'] });
  assert.is(typeof sub.data[0]?.customer, 'object');
  const withSubs = await stripe.customers.retrieve(String((sub.data[0]!.customer as Stripe.Customer).id), { expand: ['subscriptions'] });
  assert.is((withSubs as Stripe.Customer).subscriptions?.object, 'list');
  const badExpand = await rejection(stripe.customers.list({ expand: ['data.nothing_here'] }));
  assert.match(badExpand.message, /cannot be expanded/);
  const found = await s.customers.search({ query: "email:'c7@example.com'" });
  assert.equal(
    found.data.map((c) => c.email),
    ['c7@example.com'],
  );
  const meta = await s.customers.search({ query: "metadata['i']:'12' OR email:'c13@example.com'" });
  assert.equal(
    meta.data.map((c) => c.email),
    ['c13@example.com', 'c12@example.com'],
  );
});

test('events: type filters, created ranges, retention after 30 days', async () => {
  const clocked = await startFakeStripe({ rateLimit: false });
  try {
    const acct = clocked.createAccount();
    const key = 'sk_test_events000000000000000001';
    clocked.addKey(key, { account: acct.id });
    const s = client(key, clocked);
    const c = acct.create('customers', { name: 'Old' });
    const t0 = clocked.clock.now();
    clocked.clock.advance(10 * 86_400_000);
    acct.update('customers', c.id, { name: 'Newer' });
    await s.products.create({ name: 'Thing' });
    const all = await s.events.list();
    assert.equal(
      all.data.map((e) => e.type),
      ['product.created', 'customer.updated', 'customer.created'],
    );
    assert.equal(all.data[1]?.request, { id: null, idempotency_key: null }, 'control-API changes have no request');
    const recent = await s.events.list({ created: { gt: t0 } });
    assert.equal(
      recent.data.map((e) => e.type),
      ['product.created', 'customer.updated'],
    );
    const customerOnly = await s.events.list({ type: 'customer.*' });
    assert.equal(
      customerOnly.data.map((e) => e.type),
      ['customer.updated', 'customer.created'],
    );
    const oldId = all.data[2]?.id as string;
    assert.is((await s.events.retrieve(oldId)).type, 'customer.created');
    clocked.clock.advance(25 * 86_400_000);
    const kept = await s.events.list();
    assert.equal(
      kept.data.map((e) => e.type),
      ['product.created', 'customer.updated'],
      'events older than 30 days are gone',
    );
    assert.is((await rejection(s.events.retrieve(oldId))).statusCode, 404);
    assert.is(acct.events().length, 2);
    const tooMany = await rejection(s.events.list({ types: Array.from({ length: 21 }, (_, i) => `t${i}.created`) }));
    assert.is(tooMany.statusCode, 400);
  } finally {
    await clocked.close();
  }
});

test('events of one second: a held second gives two updates of one object one created, listed newest first', async () => {
  const held = await startFakeStripe({ rateLimit: false });
  try {
    const acct = held.createAccount();
    const key = 'sk_test_heldsecond00000000000001';
    held.addKey(key, { account: acct.id });
    const s = client(key, held);
    const c = await s.customers.create({ name: 'Start' });
    const second = held.clock.holdSecond();
    await s.customers.update(c.id, { name: 'First' });
    // Longer than a second apart, in one second all the same.
    await new Promise((r) => setTimeout(r, 1100));
    await s.customers.update(c.id, { name: 'Second' });
    held.clock.releaseSecond();
    const [later, earlier] = (await s.events.list({ type: 'customer.updated' })).data;
    assert.is(later!.created, second);
    assert.is(earlier!.created, second);
    assert.is((later!.data.object as Stripe.Customer).name, 'Second', 'the later change first');
    assert.is((earlier!.data.object as Stripe.Customer).name, 'First');
    // The next page after the earlier one, and the page before the later one, agree.
    assert.equal(
      (await s.events.list({ ending_before: earlier!.id, type: 'customer.updated' })).data.map((e) => e.id),
      [later!.id],
    );
    await new Promise((r) => setTimeout(r, 1100));
    assert.ok((await s.customers.update(c.id, { name: 'After' })).id);
    assert.ok((await s.events.list({ limit: 1 })).data[0]!.created > second, 'released: time moves on');
  } finally {
    await held.close();
  }
});

test('idempotency: same key and params replay; other params are an idempotency_error', async () => {
  const first = await stripe.customers.create({ email: 'idem@example.com' }, { idempotencyKey: 'idem-1' });
  const replay = await stripe.customers.create({ email: 'idem@example.com' }, { idempotencyKey: 'idem-1' });
  assert.is(replay.id, first.id);
  assert.is(replay.lastResponse.headers['idempotent-replayed'], 'true');
  assert.is(replay.lastResponse.headers['original-request'], first.lastResponse.requestId);
  assert.is(account.all('customers').filter((c) => c.email === 'idem@example.com').length, 1);
  const other = await rejection(stripe.customers.create({ email: 'other@example.com' }, { idempotencyKey: 'idem-1' }));
  assert.is(other.type, 'StripeIdempotencyError');
  assert.is(other.statusCode, 400);
  assert.is(
    other.message,
    "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'idem-1' if you meant to execute a different request.",
  );
  const elsewhere = await rejection(stripe.products.create({ name: 'x' }, { idempotencyKey: 'idem-1' }));
  assert.match(elsewhere.message, /same endpoint they were first used for \('\/v1\/customers' vs '\/v1\/products'\)/);
  const invalid = await rejection(stripe.customers.create({ email: 'x@example.com', bogus: 1 } as Stripe.CustomerCreateParams, { idempotencyKey: 'idem-2' }));
  assert.is(invalid.code, 'parameter_unknown');
  const retried = await stripe.customers.create({ email: 'x@example.com' }, { idempotencyKey: 'idem-2' });
  assert.match(retried.id, /^cus_/, 'a request that failed validation leaves its key unused');
  const events = (await stripe.events.list({ type: 'customer.created', limit: 5 })).data;
  const mine = events.find((e) => (e.data.object as Stripe.Customer).id === first.id);
  assert.equal(mine?.request, { id: first.lastResponse.requestId, idempotency_key: 'idem-1' });
});

test('auth: Stripe 401 bodies, basic auth, revoked keys, restricted keys', async () => {
  const bad = await call('GET', '/v1/customers', { key: 'sk_test_wrongkey1234abcd' });
  assert.is(bad.status, 401);
  assert.equal(bad.json, { error: { message: 'Invalid API Key provided: sk_test_************abcd', type: 'invalid_request_error' } });
  assert.match(bad.headers.get('request-id') ?? '', /^req_[0-9A-Za-z]{14}$/);
  const none = await call('GET', '/v1/customers', { key: null });
  assert.is(none.status, 401);
  assert.match(none.json.error.message, /^You did not provide an API key/);
  const basic = await call('GET', '/v1/customers?limit=1', { key: null, headers: { authorization: `Basic ${Buffer.from(`${KEY}:`).toString('base64')}` } });
  assert.is(basic.status, 200);
  const viaClient = await rejection(client('sk_test_nope00000000000000wxyz').customers.list());
  assert.is(viaClient.type, 'StripeAuthenticationError');

  const temp = 'sk_test_temporary0000000000001';
  fake.addKey(temp, { account: ACCOUNT });
  assert.is((await call('GET', '/v1/customers?limit=1', { key: temp })).status, 200);
  fake.revokeKey(temp);
  assert.is((await call('GET', '/v1/customers?limit=1', { key: temp })).status, 401);

  const rk = client(RESTRICTED);
  assert.ok(Array.isArray((await rk.products.list({ limit: 1 })).data), 'products: read granted');
  assert.ok(Array.isArray((await rk.prices.list({ limit: 1 })).data), 'prices: read granted');
  assert.match((await rk.customers.create({ name: 'by rk' })).id, /^cus_/, 'customers: write granted');
  const denied = await rejection(rk.invoices.list());
  assert.is(denied.statusCode, 403);
  assert.is(denied.type, 'StripePermissionError');
  assert.is(
    denied.message,
    `The provided key 'rk_test_***********************wxyz' does not have the required permissions for this endpoint on account '${ACCOUNT}'. Having the 'rak_invoice_read' permission would allow this request to continue.`,
  );
  const noWrite = await rejection(rk.products.create({ name: 'nope' }));
  assert.match(noWrite.message, /'rak_product_write'/);
  const sections = 'rk_test_sections0000000000000001';
  fake.addKey(sections, { account: ACCOUNT, restricted: { read: ['core', 'billing', 'checkout'] } });
  for (const path of ['/v1/customers', '/v1/charges', '/v1/invoices', '/v1/subscriptions', '/v1/checkout/sessions', '/v1/tax_rates']) {
    assert.is((await call('GET', `${path}?limit=1`, { key: sections })).status, 200, path);
  }
  const issuing = await call('GET', '/v1/issuing/cards', { key: sections });
  assert.is(issuing.status, 403);
  assert.match(issuing.json.error.message, /'rak_issuing_card_read'/);
  assert.is((await call('POST', '/v1/customers', { key: sections, form: 'name=x' })).status, 403, 'read sections grant no writes');
  const other = fake.createAccount();
  assert.throws(() => fake.addKey('sk_live_wrongmode00000000001', { account: other.id }), /live key/);
});

test('errors: unknown routes, unmodeled endpoints, bad parameters, versions', async () => {
  const unknown = await call('GET', '/v1/nothing_here');
  assert.is(unknown.status, 404);
  assert.equal(unknown.json, {
    error: {
      message: 'Unrecognized request URL (GET: /v1/nothing_here). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.',
      request_log_url: unknown.json.error.request_log_url,
      type: 'invalid_request_error',
    },
  });
  const taxRates = await call('GET', '/v1/tax_rates?limit=5');
  assert.equal(taxRates.json, { object: 'list', data: [], has_more: false, url: '/v1/tax_rates' });
  const needsParent = await call('GET', '/v1/setup_attempts');
  assert.is(needsParent.json.error.code, 'parameter_missing');
  assert.is(needsParent.json.error.param, 'setup_intent');
  const oneTaxRate = await call('GET', '/v1/tax_rates/txr_123');
  assert.is(oneTaxRate.status, 404);
  assert.is(oneTaxRate.json.error.code, 'resource_missing');
  const taxIds = await call('GET', '/v1/customers/cus_missing00000000/tax_ids');
  assert.is(taxIds.json.error.message, "No such customer: 'cus_missing00000000'");
  const write = await call('POST', '/v1/tax_rates', { form: 'display_name=VAT&percentage=20&inclusive=false' });
  assert.is(write.status, 404);
  assert.match(write.json.error.message, /does not implement/);

  const unknownParam = await rejection(stripe.customers.create({ nickname: 'x' } as Stripe.CustomerCreateParams));
  assert.equal([unknownParam.code, unknownParam.param, unknownParam.message], ['parameter_unknown', 'nickname', 'Received unknown parameter: nickname']);
  const nested = await call('POST', '/v1/customers', { form: 'address[planet]=mars' });
  assert.equal([nested.json.error.code, nested.json.error.param], ['parameter_unknown', 'address[planet]']);
  const notInt = await call('POST', '/v1/customers', { form: 'balance=lots' });
  assert.equal([nested.status, notInt.json.error.code, notInt.json.error.message], [400, 'parameter_invalid_integer', 'Invalid integer: lots']);
  const enumBad = await call('GET', '/v1/subscriptions?status=sleeping');
  assert.is(enumBad.json.error.param, 'status');
  assert.match(enumBad.json.error.message, /^Invalid status: must be one of active, all, canceled/);
  const missing = await rejection(stripe.prices.create({ unit_amount: 5 } as Stripe.PriceCreateParams));
  assert.equal([missing.code, missing.param], ['parameter_missing', 'currency']);
  const bracketed = await call('POST', '/v1/customers', {
    form: 'email=b%40example.com&metadata%5Bk%5D=v&preferred_locales%5B%5D=en&preferred_locales%5B%5D=fr',
  });
  assert.equal([bracketed.json.email, bracketed.json.metadata, bracketed.json.preferred_locales], ['b@example.com', { k: 'v' }, ['en', 'fr']]);

  const versioned = await call('GET', '/v1/customers?limit=1', { headers: { 'stripe-version': '2024-06-20' } });
  assert.is(versioned.headers.get('stripe-version'), '2024-06-20');
  const defaulted = await call('GET', '/v1/customers?limit=1', { headers: { 'stripe-version': '' } });
  assert.is(defaulted.status, 400);
  const noHeader = await fetch(`${fake.url}/v1/customers?limit=1`, { headers: { authorization: `Bearer ${KEY}` } });
  assert.is(noHeader.headers.get('stripe-version'), API_VERSION, 'the account default');
  const badVersion = await call('GET', '/v1/customers', { headers: { 'stripe-version': '2024-13-45' } });
  assert.equal([badVersion.status, badVersion.json.error.message], [400, 'Invalid Stripe API version: 2024-13-45']);
});

test('rate limit: 25 requests a second per test-mode account, then Stripe 429s', async () => {
  const limited = await startFakeStripe({ rateLimit: { testPerSecond: 5, livePerSecond: 100 } });
  try {
    const a = limited.createAccount();
    const b = limited.createAccount();
    limited.addKey('sk_test_ratelimitA0000000001', { account: a.id });
    limited.addKey('sk_test_ratelimitB0000000001', { account: b.id });
    const statuses: number[] = [];
    let body: unknown;
    for (let i = 0; i < 7; i++) {
      const r = await call('GET', '/v1/customers', { key: 'sk_test_ratelimitA0000000001', on: limited });
      statuses.push(r.status);
      if (r.status === 429) body = r.json;
    }
    assert.equal(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal(body, {
      error: {
        code: 'rate_limit',
        doc_url: 'https://stripe.com/docs/error-codes/rate-limit',
        message: 'Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.',
        request_log_url: (body as { error: { request_log_url: string } }).error.request_log_url,
        type: 'invalid_request_error',
      },
    });
    assert.is((await call('GET', '/v1/customers', { key: 'sk_test_ratelimitB0000000001', on: limited })).status, 200, 'other accounts have their own window');
    const viaClient = await rejection(client('sk_test_ratelimitA0000000001', limited).customers.list());
    assert.is(viaClient.type, 'StripeRateLimitError');
    assert.is(limited.stats.rateLimited, 3);
    assert.equal(limited.stats.byAccount(a.id), { requests: 8, rateLimited: 3 });
    assert.equal(limited.stats.byPath('/v1/customers'), { requests: 9, rateLimited: 3 });
    a.create('customers', { name: 'control API is not limited' });
    await sleep(1100);
    assert.is((await call('GET', '/v1/customers', { key: 'sk_test_ratelimitA0000000001', on: limited })).status, 200, 'the window slides');
  } finally {
    await limited.close();
  }
});

test('upcoming invoices: create_preview computes the next invoice; the old endpoint only on old versions', async () => {
  const { customer, price } = await billable(3000);
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: price.id }] });
  await stripe.invoiceItems.create({ customer: customer.id, amount: 450, currency: 'usd', description: 'Overage' });
  const eventsBefore = (await stripe.events.list({ limit: 1 })).data[0]?.id;
  const preview = await stripe.invoices.createPreview({ subscription: sub.id });
  assert.match(preview.id ?? '', /^upcoming_in_1/);
  assert.is(preview.total, 3450);
  assert.is(preview.billing_reason, 'upcoming');
  assert.is(preview.status, 'draft');
  const periodEnd = (sub.items.data[0] as Stripe.SubscriptionItem).current_period_end;
  assert.is(preview.created, periodEnd);
  assert.equal(
    preview.lines.data.map((l) => l.amount),
    [3000, 450],
  );
  assert.is(preview.lines.data[0]?.period.start, periodEnd);
  assert.is((await stripe.events.list({ limit: 1 })).data[0]?.id, eventsBefore, 'previews leave no events');
  const more = await stripe.invoices.createPreview({ subscription: sub.id, subscription_details: { items: [{ id: sub.items.data[0]?.id, quantity: 3 }] } });
  assert.is(more.total, 9450);
  const customerOnly = await rejection(stripe.invoices.createPreview({ customer: customer.id }));
  assert.is(customerOnly.statusCode, 400);
  assert.match(customerOnly.message, /^You must provide at least one of: `subscription`/);

  const current = await call('GET', `/v1/invoices/upcoming?customer=${customer.id}`);
  assert.equal([current.status, current.json.error.code, current.json.error.message], [404, 'resource_missing', "No such invoice: 'upcoming'"]);
  const old = await call('GET', `/v1/invoices/upcoming?customer=${customer.id}`, { headers: { 'stripe-version': '2024-06-20' } });
  assert.is(old.status, 200);
  assert.is(old.json.id, undefined, 'the old upcoming invoice has no id');
  assert.is(old.json.total, 3450);
  const oldLines = await call('GET', `/v1/invoices/upcoming/lines?customer=${customer.id}&limit=1`, { headers: { 'stripe-version': '2025-02-24.acacia' } });
  assert.equal([oldLines.json.data.length, oldLines.json.has_more], [1, true]);
  const nobody = await stripe.customers.create({});
  const none = await call('GET', `/v1/invoices/upcoming?customer=${nobody.id}`, { headers: { 'stripe-version': '2024-06-20' } });
  assert.equal([none.status, none.json.error.code], [404, 'invoice_upcoming_none']);
});

test('generate: deterministic for a seed, the expected mix, 100k objects in seconds', async () => {
  const one = await startFakeStripe({ rateLimit: false, now: () => Date.UTC(2026, 5, 1) });
  const two = await startFakeStripe({ rateLimit: false, now: () => Date.UTC(2026, 5, 1) });
  try {
    const a = one.createAccount({ id: 'acct_1Deterministic0001' });
    const b = two.createAccount({ id: 'acct_1Deterministic0001' });
    const sa = a.generate({ seed: 42, customers: 300 });
    const sb = b.generate({ seed: 42, customers: 300 });
    assert.equal(sa, sb);
    for (const r of ['customers', 'subscriptions', 'invoices', 'charges', 'refunds', 'payouts', 'checkout/sessions']) {
      assert.equal(JSON.stringify(a.all(r)), JSON.stringify(b.all(r)), r);
    }
    assert.is(sa.customers, 300);
    assert.ok((sa.subscriptions ?? 0) > 120 && (sa.subscriptions ?? 0) < 200, `subscriptions ${sa.subscriptions}`);
    assert.ok((sa.invoices ?? 0) > (sa.subscriptions ?? 0) * 3);
    assert.ok((sa.refunds ?? 0) > 0 && (sa.payouts ?? 0) > 20 && (sa.checkout_sessions ?? 0) === 30);
    assert.is(sa.events, 0, 'no events unless asked');
    const c = a.generate({ seed: 43, customers: 10 });
    assert.is(c.customers, 10, 'a second run adds, with fresh ids');
    assert.is(a.count('customers'), 310);

    const statuses = new Set(a.all('subscriptions').map((s) => s.status));
    assert.equal([...statuses].sort(), ['active', 'canceled', 'past_due', 'trialing']);
    const key = 'sk_test_generated0000000000001';
    one.addKey(key, { account: a.id });
    const s = client(key, one);
    const canceled = await s.subscriptions.list({ status: 'canceled', limit: 100 });
    assert.ok(canceled.data.length > 5);
    const oldest = Math.min(...a.all('customers').map((x) => x.created as number));
    assert.ok(oldest < one.clock.now() - 300 * 86_400, 'created times spread over the past');
    const invoices = await s.invoices.list({ limit: 100, expand: ['data.customer'] });
    assert.ok(invoices.data.every((i) => typeof i.customer === 'object'));
    const paid = invoices.data.find((i) => i.status === 'paid' && i.amount_paid > 0) as Stripe.Invoice;
    const pay = await s.invoicePayments.list({ invoice: paid.id });
    const pi = await s.paymentIntents.retrieve(String(pay.data[0]?.payment.payment_intent));
    assert.is(pi.amount_received, paid.amount_paid);

    const big = two.createAccount({ id: 'acct_1BigGeneratedAcct01' });
    const t0 = performance.now();
    const sizes = big.generate({ seed: 1, customers: 5000 });
    const ms = performance.now() - t0;
    const total = Object.values(sizes).reduce((x, y) => x + y, 0);
    assert.ok(total >= 100_000, `generated ${total} objects`);
    assert.ok(ms < 10_000, `${total} objects took ${ms} ms`);
    console.log(`  generated ${total.toLocaleString('en')} objects in ${ms.toFixed(0)} ms`);
    const bigKey = 'sk_test_bigaccount00000000001';
    two.addKey(bigKey, { account: big.id });
    const t1 = performance.now();
    const firstPage = await client(bigKey, two).invoices.list({ limit: 100 });
    console.log(`  first page of ${sizes.invoices} invoices in ${(performance.now() - t1).toFixed(0)} ms`);
    assert.is(firstPage.data.length, 100);
    assert.ok((firstPage.data[0]?.created ?? 0) >= (firstPage.data[99]?.created ?? 0));
    const withEvents = two.createAccount();
    const ev = withEvents.generate({ seed: 5, customers: 20, events: true });
    assert.ok((ev.events ?? 0) > 50);
    assert.ok(withEvents.events().some((e) => e.type === 'invoice.paid'));
  } finally {
    await one.close();
    await two.close();
  }
});

test('object shapes: every field Stripe shows by default, nothing the spec does not define', async () => {
  const shapes = await startFakeStripe({ rateLimit: false });
  try {
    const a = shapes.createAccount();
    a.generate({ seed: 9, customers: 60, events: true });
    const c = a.all('customers')[0] as StripeObject;
    a.create('invoiceitems', { customer: c.id, amount: 100, currency: 'usd' });
    const charge = a.all('charges').find((ch) => ch.status === 'succeeded' && ch.disputed === false && ch.amount_refunded === 0) as StripeObject;
    a.create('disputes', { charge: charge.id, reason: 'duplicate' });
    const seen = new Map<string, Array<Record<string, unknown>>>();
    const visit = (v: unknown) => {
      if (!v || typeof v !== 'object') return;
      if (Array.isArray(v)) return v.forEach(visit);
      const o = v as Record<string, unknown>;
      if (typeof o.object === 'string' && o.object !== 'list' && objectFields(o.object)) {
        const list = seen.get(o.object) ?? [];
        list.push(o);
        seen.set(o.object, list);
      }
      Object.values(o).forEach(visit);
    };
    for (const r of [
      'customers',
      'products',
      'prices',
      'plans',
      'coupons',
      'subscriptions',
      'invoices',
      'invoiceitems',
      'invoice_payments',
      'payment_intents',
      'charges',
      'refunds',
      'payment_methods',
      'checkout/sessions',
      'balance_transactions',
      'payouts',
      'disputes',
      'events',
    ]) {
      visit(a.all(r));
    }
    // Includable since 2022-11-15: Stripe's own fixture still shows it.
    const notByDefault: Record<string, string[]> = { charge: ['refunds'] };
    for (const name of [
      'customer',
      'product',
      'price',
      'plan',
      'coupon',
      'subscription',
      'subscription_item',
      'invoice',
      'line_item',
      'invoiceitem',
      'invoice_payment',
      'payment_intent',
      'charge',
      'refund',
      'payment_method',
      'checkout.session',
      'balance_transaction',
      'payout',
      'dispute',
      'event',
    ]) {
      const objects = seen.get(name) ?? [];
      assert.ok(objects.length > 0, `saw a ${name}`);
      const spec = objectFields(name);
      if (!spec) throw new Error(name);
      for (const o of objects) {
        const keys = Object.keys(o);
        const extra = keys.filter((k) => !spec.props.includes(k));
        assert.equal(extra, [], `${name} fields outside the spec`);
        const missing = [...spec.required, ...spec.defaults].filter((k) => !keys.includes(k) && !(notByDefault[name] ?? []).includes(k));
        assert.equal([...new Set(missing)], [], `${name} lacks default fields`);
      }
    }
  } finally {
    await shapes.close();
  }
});

test('faults: status, delay, hang, truncate; matched by method, path prefix or RegExp, account', async () => {
  fake.faults.add({ kind: 'status', status: 503, match: { method: 'GET', path: '/v1/customers' } });
  const first = await call('GET', '/v1/customers?limit=1');
  assert.is(first.status, 503);
  assert.equal(first.json.error.type, 'api_error');
  assert.is((await call('GET', '/v1/customers?limit=1')).status, 200, 'times defaults to 1');

  fake.faults.add({ kind: 'status', status: 500, times: 2, match: { path: /^\/v1\/products/ } });
  const retrying = client(KEY, fake, { maxNetworkRetries: 2 });
  const ok = await retrying.products.list({ limit: 1 });
  assert.ok(Array.isArray(ok.data), 'stripe-node retries 5xx: two failures, then an answer');

  fake.faults.add({ kind: 'status', status: 402, match: { path: '/v1/charges', account: 'acct_someoneelse0001' } });
  assert.is((await call('GET', '/v1/charges?limit=1')).status, 200, 'rules for another account do not apply');
  fake.faults.clear();

  fake.faults.add({ kind: 'delay', delayMs: 250, match: { path: '/v1/balance' } });
  const t0 = Date.now();
  const balance = await stripe.balance.retrieve();
  assert.ok(Date.now() - t0 >= 240);
  assert.is(balance.object, 'balance');

  fake.faults.add({ kind: 'hang', match: { path: '/v1/coupons' } });
  const hung = await rejection(client(KEY, fake, { timeout: 300 }).coupons.list());
  assert.is(hung.type, 'StripeConnectionError');

  fake.faults.add({ kind: 'truncate', match: { path: '/v1/events' } });
  const cut = await rejection(stripe.events.list());
  assert.ok(cut.type === 'StripeConnectionError' || cut.type === 'StripeAPIError', cut.type);
  assert.is((await stripe.events.list({ limit: 1 })).data.length, 1);
  assert.ok(fake.stats.requests > 0);
  assert.ok(fake.stats.byPath('/v1/events').requests >= 2);
});

test('disputes and payouts: control-opened disputes update and close; payouts need balance', async () => {
  const pi = await stripe.paymentIntents.create({ amount: 10_000, currency: 'usd', payment_method: 'pm_card_visa', confirm: true });
  const dispute = account.create('disputes', { charge: String(pi.latest_charge) });
  assert.match(dispute.id, /^du_1/);
  assert.is(dispute.status, 'needs_response');
  assert.is((await stripe.charges.retrieve(String(pi.latest_charge))).disputed, true);
  const updated = await stripe.disputes.update(dispute.id, { evidence: { customer_name: 'Pat' }, metadata: { case: '7' } });
  assert.is(updated.evidence.customer_name, 'Pat');
  assert.is(updated.status, 'under_review');
  const closed = await stripe.disputes.close(dispute.id);
  assert.is(closed.status, 'lost');
  const types = (await stripe.events.list({ limit: 3 })).data.map((e) => e.type);
  assert.equal(types, ['charge.dispute.closed', 'charge.dispute.updated', 'charge.updated']);

  const broke = fake.createAccount();
  fake.addKey('sk_test_brokeaccount000000001', { account: broke.id });
  const noFunds = await rejection(client('sk_test_brokeaccount000000001').payouts.create({ amount: 100, currency: 'usd' }));
  assert.is(noFunds.code, 'balance_insufficient');
  fake.clock.advance(3 * 86_400_000);
  const payout = await stripe.payouts.create({ amount: 1000, currency: 'usd' });
  assert.equal([payout.status, payout.automatic, payout.amount], ['pending', false, 1000]);
  const canceled = await stripe.payouts.cancel(payout.id);
  assert.is(canceled.status, 'canceled');
  const txn = await stripe.balanceTransactions.list({ type: 'payout', limit: 2 });
  assert.equal(
    txn.data.map((t) => t.amount).sort((x, y) => x - y),
    [-1000, 1000],
  );
});

test.run();
