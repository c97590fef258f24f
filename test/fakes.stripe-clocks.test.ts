/**
 * Time-driven billing in the fake Stripe, through Stripe's test-clock API, with the official
 * stripe client over HTTP: renewals, trials, declines and retries, cancellations at period end;
 * and the seeded billing traffic generator (sim/traffic/stripe.ts) against the fake.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Stripe from 'stripe';
import { Random } from '../sim/random.ts';
import { stripeBilling } from '../sim/traffic/stripe.ts';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../fakes/stripe/index.ts';
import { objectFields } from '../fakes/stripe/spec/index.ts';

const API_VERSION = '2026-08-26.dahlia';
const DAY = 86_400;
const HOUR = 3600;
/** 2026-01-01T00:00:00Z: the clocks start here, whatever the real date. */
const T0 = Date.UTC(2026, 0, 1) / 1000;

let fake: FakeStripe;
let accounts = 0;

interface Fresh {
  stripe: Stripe;
  account: FakeStripeAccount;
  key: string;
}

/** A new account (test mode unless asked) with its own key and client. */
function fresh(livemode = false): Fresh {
  const n = String(++accounts).padStart(4, '0');
  const account = fake.createAccount({ id: `acct_1ClockTest000${n}`, livemode });
  const key = `sk_${livemode ? 'live' : 'test'}_51ClockKey${n}0000000000000abcd`;
  fake.addKey(key, { account: account.id });
  const stripe = new Stripe(key, { host: '127.0.0.1', port: fake.port, protocol: 'http', apiVersion: API_VERSION as never, maxNetworkRetries: 0 });
  return { stripe, account, key };
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

/** Events newer than `marker` (an event id, or undefined for all), oldest first, read over HTTP. */
async function eventsSince(stripe: Stripe, marker: string | undefined): Promise<Stripe.Event[]> {
  const out: Stripe.Event[] = [];
  for await (const e of stripe.events.list({ limit: 100 })) {
    if (e.id === marker) break;
    out.push(e);
  }
  return out.reverse();
}

async function lastEventId(stripe: Stripe): Promise<string | undefined> {
  return (await stripe.events.list({ limit: 1 })).data[0]?.id;
}

/** `wanted` appears in `types` in this order (other types may come between). */
function inOrder(types: string[], wanted: string[]): void {
  let i = 0;
  for (const t of types) if (t === wanted[i]) i++;
  assert.ok(i === wanted.length, `expected ${wanted.join(' → ')} in order; got ${types.join(', ')} (stuck at ${wanted[i]})`);
}

async function catalogue(stripe: Stripe): Promise<{ monthly: Stripe.Price; yearly: Stripe.Price }> {
  const product = await stripe.products.create({ name: 'Team plan' });
  const monthly = await stripe.prices.create({ product: product.id, currency: 'usd', unit_amount: 1500, recurring: { interval: 'month' } });
  const yearly = await stripe.prices.create({ product: product.id, currency: 'usd', unit_amount: 15000, recurring: { interval: 'year' } });
  return { monthly, yearly };
}

async function clockCustomer(stripe: Stripe, clock: string, card = 'pm_card_visa'): Promise<Stripe.Customer> {
  return stripe.customers.create({ email: 'clocked@example.com', test_clock: clock, payment_method: card, invoice_settings: { default_payment_method: card } });
}

const periodEnd = (sub: Stripe.Subscription) => sub.items.data[0]!.current_period_end;

test.before(async () => {
  fake = await startFakeStripe({ rateLimit: false });
});

test.after(async () => {
  await fake.close();
});

test('test clocks: create, retrieve, list, delete, shaped as the spec; customers on a clock live at its time', async () => {
  const { stripe } = fresh();
  const clock = await stripe.testHelpers.testClocks.create({ frozen_time: T0, name: 'Renewals' });
  assert.match(clock.id, /^clock_1[0-9A-Za-z]{23}$/);
  assert.equal(Object.keys(clock).sort(), [...objectFields('test_helpers.test_clock')!.props].sort());
  assert.is(clock.object, 'test_helpers.test_clock');
  assert.is(clock.frozen_time, T0);
  assert.is(clock.status, 'ready');
  assert.is(clock.name, 'Renewals');
  assert.ok(Math.abs(clock.created - Date.now() / 1000) < 5, 'created in real time');
  assert.is((await stripe.testHelpers.testClocks.retrieve(clock.id)).id, clock.id);
  assert.equal(
    (await stripe.testHelpers.testClocks.list()).data.map((c) => c.id),
    [clock.id],
  );
  assert.is((await stripe.events.list({ limit: 1 })).data[0]?.type, 'test_helpers.test_clock.created');

  const customer = await clockCustomer(stripe, clock.id);
  assert.is(customer.test_clock, clock.id);
  assert.is(customer.created, T0, 'a clock customer is created at its frozen time');
  const plain = await stripe.customers.create({ email: 'plain@example.com' });
  // Stripe's lists leave test-clock customers out unless asked for them.
  assert.equal(
    (await stripe.customers.list()).data.map((c) => c.id),
    [plain.id],
  );
  assert.equal(
    (await stripe.customers.list({ test_clock: clock.id })).data.map((c) => c.id),
    [customer.id],
  );
  const expanded = await stripe.customers.retrieve(customer.id, { expand: ['test_clock'] });
  assert.is(((expanded as Stripe.Customer).test_clock as Stripe.TestHelpers.TestClock).frozen_time, T0);
  const missing = await rejection(stripe.customers.create({ test_clock: 'clock_1NoSuchClock000000000000' }));
  assert.is(missing.statusCode, 404);
  assert.is(missing.param, 'test_clock');

  const deleted = await stripe.testHelpers.testClocks.del(clock.id);
  assert.equal({ ...deleted, lastResponse: undefined }, { id: clock.id, object: 'test_helpers.test_clock', deleted: true, lastResponse: undefined });
  assert.is((await rejection(stripe.testHelpers.testClocks.retrieve(clock.id))).statusCode, 404);
  assert.ok((await stripe.customers.retrieve(customer.id)).deleted, 'deleting a clock deletes its customers');
  const types = (await stripe.events.list({ limit: 2 })).data.map((e) => e.type);
  assert.equal(types, ['test_helpers.test_clock.deleted', 'customer.deleted']);
});

test('a monthly subscription renews when its clock passes the period end: draft, finalized an hour later, paid', async () => {
  const { stripe } = fresh();
  const { monthly } = await catalogue(stripe);
  const clock = await stripe.testHelpers.testClocks.create({ frozen_time: T0 });
  const customer = await clockCustomer(stripe, clock.id);
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: monthly.id }] });
  assert.is(sub.status, 'active');
  assert.is(sub.test_clock, clock.id);
  assert.is(sub.start_date, T0, 'starts at the clock’s time');
  assert.is(periodEnd(sub), Date.UTC(2026, 1, 1) / 1000);
  // Stripe's subscription list leaves test-clock subscriptions out unless asked by clock or customer.
  assert.is((await stripe.subscriptions.list()).data.length, 0);
  assert.is((await stripe.subscriptions.list({ test_clock: clock.id })).data[0]?.id, sub.id);
  assert.is((await stripe.subscriptions.list({ customer: customer.id })).data[0]?.id, sub.id);

  const marker = await lastEventId(stripe);
  const target = periodEnd(sub) + 2 * HOUR;
  const answer = await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: target });
  assert.is(answer.status, 'advancing');
  assert.equal(answer.status_details, { advancing: { target_frozen_time: target } });
  const ready = await stripe.testHelpers.testClocks.retrieve(clock.id);
  assert.is(ready.status, 'ready');
  assert.is(ready.frozen_time, target);

  const events = await eventsSince(stripe, marker);
  const types = events.map((e) => e.type);
  inOrder(types, [
    'test_helpers.test_clock.advancing',
    'invoice.created',
    'customer.subscription.updated',
    'invoice.finalized',
    'payment_intent.created',
    'charge.succeeded',
    'payment_intent.succeeded',
    'invoice.paid',
    'invoice.payment_succeeded',
    'test_helpers.test_clock.ready',
  ]);
  const now = Date.now() / 1000;
  for (const e of events) assert.ok(Math.abs(e.created - now) < 5, `${e.type} is dated in real time`);
  const updated = events.find((e) => e.type === 'customer.subscription.updated')!;
  const previous = updated.data.previous_attributes as Record<string, unknown>;
  assert.ok('items' in previous && 'latest_invoice' in previous, 'previous_attributes names the moved period and the new invoice');
  const created = events.find((e) => e.type === 'invoice.created')!.data.object as Stripe.Invoice;
  assert.is(created.status, 'draft');

  const renewed = await stripe.subscriptions.retrieve(sub.id);
  assert.is(renewed.status, 'active');
  assert.is(renewed.items.data[0]!.current_period_start, Date.UTC(2026, 1, 1) / 1000);
  assert.is(periodEnd(renewed), Date.UTC(2026, 2, 1) / 1000);
  const invoice = await stripe.invoices.retrieve(renewed.latest_invoice as string);
  assert.is(invoice.billing_reason, 'subscription_cycle');
  assert.is(invoice.status, 'paid');
  assert.is(invoice.amount_paid, 1500);
  assert.is(invoice.test_clock, clock.id);
  assert.is(invoice.created, Date.UTC(2026, 1, 1) / 1000, 'drafted at the period end, clock time');
  assert.is(invoice.status_transitions.finalized_at, Date.UTC(2026, 1, 1) / 1000 + HOUR);
  assert.equal(invoice.lines.data[0]!.period, { start: Date.UTC(2026, 1, 1) / 1000, end: Date.UTC(2026, 2, 1) / 1000 });
  const charges = await stripe.charges.list({ customer: customer.id });
  assert.is(charges.data.length, 2, 'the first invoice and the renewal');
  assert.ok(charges.data.every((c) => c.status === 'succeeded' && typeof c.balance_transaction === 'string'));
  assert.ok(Math.abs(charges.data[0]!.created - now) < 5, 'payment intents and charges keep real time, as Stripe’s do');

  // Two more months in one advance: two more renewals, in order.
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: Date.UTC(2026, 3, 1) / 1000 + 2 * HOUR });
  const cycles = await stripe.invoices.list({ customer: customer.id });
  assert.equal(
    cycles.data.map((i) => [i.billing_reason, i.status]),
    [
      ['subscription_cycle', 'paid'],
      ['subscription_cycle', 'paid'],
      ['subscription_cycle', 'paid'],
      ['subscription_create', 'paid'],
    ],
  );
});

test('a trial warns three days ahead, then ends: trialing → active and the first paid invoice', async () => {
  const { stripe } = fresh();
  const { monthly } = await catalogue(stripe);
  const clock = await stripe.testHelpers.testClocks.create({ frozen_time: T0 });
  const customer = await clockCustomer(stripe, clock.id);
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: monthly.id }], trial_period_days: 7 });
  assert.is(sub.status, 'trialing');
  assert.is(sub.trial_end, T0 + 7 * DAY);
  let marker = await lastEventId(stripe);
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: T0 + 5 * DAY });
  const warned = await eventsSince(stripe, marker);
  assert.equal(
    warned.map((e) => e.type),
    ['test_helpers.test_clock.advancing', 'customer.subscription.trial_will_end', 'test_helpers.test_clock.ready'],
  );
  assert.is((await stripe.subscriptions.retrieve(sub.id)).status, 'trialing');

  marker = await lastEventId(stripe);
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: T0 + 8 * DAY });
  const events = await eventsSince(stripe, marker);
  inOrder(
    events.map((e) => e.type),
    ['invoice.created', 'customer.subscription.updated', 'invoice.finalized', 'invoice.paid'],
  );
  const update = events.find((e) => e.type === 'customer.subscription.updated')!;
  assert.is((update.data.previous_attributes as { status?: string }).status, 'trialing');
  const active = await stripe.subscriptions.retrieve(sub.id);
  assert.is(active.status, 'active');
  assert.is(active.items.data[0]!.current_period_start, T0 + 7 * DAY);
  const invoice = await stripe.invoices.retrieve(active.latest_invoice as string);
  assert.equal([invoice.billing_reason, invoice.status, invoice.amount_paid], ['subscription_cycle', 'paid', 1500]);
});

test('a declining card: payment_failed and past_due; the retry after the card is replaced pays; three failures cancel', async () => {
  const { stripe } = fresh();
  const { monthly } = await catalogue(stripe);
  const clock = await stripe.testHelpers.testClocks.create({ frozen_time: T0 });
  const customer = await clockCustomer(stripe, clock.id);
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: monthly.id }] });
  // The card on file starts declining (Stripe's pm_card_chargeCustomerFail attaches, then fails charges).
  const failing = await stripe.paymentMethods.attach('pm_card_chargeCustomerFail', { customer: customer.id });
  await stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: failing.id } });

  let marker = await lastEventId(stripe);
  const end = periodEnd(sub);
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: end + 2 * HOUR });
  let events = await eventsSince(stripe, marker);
  inOrder(
    events.map((e) => e.type),
    ['invoice.created', 'invoice.finalized', 'charge.failed', 'payment_intent.payment_failed', 'invoice.payment_failed', 'customer.subscription.updated'],
  );
  const pastDue = await stripe.subscriptions.retrieve(sub.id);
  assert.is(pastDue.status, 'past_due');
  const open = await stripe.invoices.retrieve(pastDue.latest_invoice as string);
  assert.is(open.status, 'open');
  assert.is(open.attempt_count, 1);
  assert.is(open.next_payment_attempt, end + HOUR + 3 * DAY, 'retried three days after the failure');
  const failedEvent = events.find((e) => e.type === 'invoice.payment_failed')!.data.object as Stripe.Invoice;
  assert.is(failedEvent.next_payment_attempt, end + HOUR + 3 * DAY, 'the event shows the next attempt');
  assert.is(((await stripe.customers.retrieve(customer.id)) as Stripe.Customer).delinquent, true);

  // The customer fixes the card; the retry (not the update) pays.
  const good = await stripe.paymentMethods.attach('pm_card_visa', { customer: customer.id });
  await stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: good.id } });
  assert.is((await stripe.invoices.retrieve(open.id)).status, 'open');
  marker = await lastEventId(stripe);
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: end + 4 * DAY });
  events = await eventsSince(stripe, marker);
  inOrder(
    events.map((e) => e.type),
    ['charge.succeeded', 'invoice.paid', 'invoice.payment_succeeded', 'customer.updated', 'customer.subscription.updated'],
  );
  const paid = await stripe.invoices.retrieve(open.id);
  assert.equal([paid.status, paid.attempt_count, paid.next_payment_attempt], ['paid', 2, null]);
  assert.is((await stripe.subscriptions.retrieve(sub.id)).status, 'active');
  assert.is(((await stripe.customers.retrieve(customer.id)) as Stripe.Customer).delinquent, false);

  // Back to the failing card: the next renewal fails three times, 3 days apart, then the subscription is canceled.
  await stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: failing.id } });
  const next = periodEnd(await stripe.subscriptions.retrieve(sub.id));
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: next + 10 * DAY });
  const canceled = await stripe.subscriptions.retrieve(sub.id);
  assert.is(canceled.status, 'canceled');
  assert.is(canceled.cancellation_details?.reason, 'payment_failed');
  assert.is(canceled.ended_at, next + HOUR + 6 * DAY);
  const unpaid = await stripe.invoices.retrieve(canceled.latest_invoice as string);
  assert.equal([unpaid.status, unpaid.attempt_count, unpaid.next_payment_attempt], ['open', 3, null]);
  const deletedEvent = (await stripe.events.list({ type: 'customer.subscription.deleted', limit: 1 })).data[0];
  assert.is((deletedEvent!.data.object as Stripe.Subscription).id, sub.id);
});

test('incomplete subscriptions expire after 23 hours; cancel_at_period_end ends at the period end', async () => {
  const { stripe } = fresh();
  const { monthly, yearly } = await catalogue(stripe);
  const clock = await stripe.testHelpers.testClocks.create({ frozen_time: T0 });
  const declining = await clockCustomer(stripe, clock.id, 'pm_card_chargeCustomerFail');
  const incomplete = await stripe.subscriptions.create({ customer: declining.id, items: [{ price: monthly.id }] });
  assert.is(incomplete.status, 'incomplete');
  const leaving = await clockCustomer(stripe, clock.id);
  const sub = await stripe.subscriptions.create({ customer: leaving.id, items: [{ price: yearly.id }] });
  await stripe.subscriptions.update(sub.id, { cancel_at_period_end: true });

  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: T0 + DAY });
  const expired = await stripe.subscriptions.retrieve(incomplete.id);
  assert.is(expired.status, 'incomplete_expired');
  assert.is((await stripe.invoices.retrieve(expired.latest_invoice as string)).status, 'void');
  assert.is((await stripe.invoices.list({ customer: declining.id })).data.length, 1, 'no renewal for an expired subscription');

  // Yearly: two years is as far as the clock may go at once; the subscription ends at its period end.
  const far = await rejection(stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: T0 + 800 * DAY }));
  assert.is(far.statusCode, 400);
  const marker = await lastEventId(stripe);
  await stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: periodEnd(sub) + DAY });
  const events = await eventsSince(stripe, marker);
  assert.equal(
    events.map((e) => e.type),
    ['test_helpers.test_clock.advancing', 'customer.subscription.deleted', 'test_helpers.test_clock.ready'],
  );
  const ended = await stripe.subscriptions.retrieve(sub.id);
  assert.equal([ended.status, ended.ended_at, ended.cancellation_details?.reason], ['canceled', periodEnd(sub), 'cancellation_requested']);
});

test('advancing into the past is a 400 in Stripe’s error shape; clocks are test mode only', async () => {
  const { stripe, key } = fresh();
  const clock = await stripe.testHelpers.testClocks.create({ frozen_time: T0 });
  const past = await rejection(stripe.testHelpers.testClocks.advance(clock.id, { frozen_time: T0 - DAY }));
  assert.is(past.statusCode, 400);
  assert.is(past.type, 'StripeInvalidRequestError');
  assert.is(past.param, 'frozen_time');
  const raw = await fetch(`${fake.url}/v1/test_helpers/test_clocks/${clock.id}/advance`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: `frozen_time=${T0}`,
  });
  assert.is(raw.status, 400);
  const body = (await raw.json()) as { error: Record<string, unknown> };
  assert.equal(Object.keys(body.error).sort(), ['message', 'param', 'request_log_url', 'type']);
  assert.is(body.error.type, 'invalid_request_error');
  assert.is((await stripe.testHelpers.testClocks.retrieve(clock.id)).frozen_time, T0, 'nothing moved');
  const missing = await rejection(stripe.testHelpers.testClocks.advance(clock.id, {} as never));
  assert.is(missing.code, 'parameter_missing');
  const live = fresh(true);
  assert.is((await rejection(live.stripe.testHelpers.testClocks.create({ frozen_time: T0 }))).statusCode, 400);
});

test('Stripe’s dispute test card: the payment succeeds, then a dispute opens', async () => {
  const { stripe } = fresh();
  const pi = await stripe.paymentIntents.create({ amount: 2500, currency: 'usd', payment_method: 'pm_card_createDispute', confirm: true });
  assert.is(pi.status, 'succeeded');
  const disputes = await stripe.disputes.list();
  assert.is(disputes.data.length, 1);
  assert.equal([disputes.data[0]!.charge, disputes.data[0]!.reason, disputes.data[0]!.status], [pi.latest_charge, 'fraudulent', 'needs_response']);
  assert.ok((await stripe.events.list({ type: 'charge.dispute.created' })).data.length === 1);
});

test('coupons applied to a subscription are recorded as discounts, with their events', async () => {
  const { stripe } = fresh();
  const { monthly } = await catalogue(stripe);
  const coupon = await stripe.coupons.create({ percent_off: 20, duration: 'repeating', duration_in_months: 3 });
  const customer = await stripe.customers.create({ payment_method: 'pm_card_visa', invoice_settings: { default_payment_method: 'pm_card_visa' } });
  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: monthly.id }] });
  const discounted = await stripe.subscriptions.update(sub.id, { discounts: [{ coupon: coupon.id }] });
  assert.is(discounted.discounts.length, 1);
  assert.match(discounted.discounts[0] as string, /^di_/);
  const [created, updated] = (await stripe.events.list({ limit: 2 })).data;
  assert.is(created?.type, 'customer.discount.created');
  const discount = created?.data.object as unknown as Record<string, unknown>;
  assert.equal(Object.keys(discount).sort(), [...objectFields('discount')!.props].sort());
  assert.equal([discount.subscription, (discount.source as { coupon: string }).coupon], [sub.id, coupon.id]);
  assert.is(updated?.type, 'customer.subscription.updated');
  const missing = await rejection(stripe.subscriptions.update(sub.id, { discounts: [{ coupon: 'nope' }] }));
  assert.equal([missing.statusCode, missing.param], [404, 'discounts[0][coupon]']);
  await stripe.subscriptions.update(sub.id, { discounts: '' });
  assert.is((await stripe.events.list({ limit: 1 })).data[0]?.type, 'customer.discount.deleted');
});

test('billing traffic: a seeded, paced mix of operations with renewals paid and failed; the same seed replays', async () => {
  // Its own fake, with Stripe's test-mode limit lowered to what the traffic may use: a 429 would show.
  const limited = await startFakeStripe({ rateLimit: { testPerSecond: 20, livePerSecond: 100 } });
  try {
    const runs = [1, 2].map((i) => {
      const account = limited.createAccount({ id: `acct_1TrafficTest000${i}` });
      const key = `sk_test_51Traffic${i}000000000000000000wxyz`;
      limited.addKey(key, { account: account.id });
      const stripe = new Stripe(key, { host: '127.0.0.1', port: limited.port, protocol: 'http', apiVersion: API_VERSION as never, maxNetworkRetries: 0 });
      const logs: string[] = [];
      const actor = stripeBilling({ stripe, random: new Random(7), log: (m) => logs.push(m), maxRequestsPerSecond: 18 });
      return { account, actor, logs };
    });
    const stop = new AbortController();
    const running = runs.map((r) => r.actor.run(stop.signal));
    await new Promise((resolve) => setTimeout(resolve, 8000));
    stop.abort();
    const stopping = Date.now();
    await Promise.all(running);
    assert.ok(Date.now() - stopping < 1000, 'run() returns within a second of the abort');

    const [{ account, actor, logs }] = runs as [(typeof runs)[0]];
    const done = [...actor.counts.done.keys()];
    assert.ok(done.length >= 6, `a mix of operations: ${done.join(', ')}`);
    for (const kind of ['customer.create', 'subscription.create', 'test_clock.advance']) assert.ok(done.includes(kind), `did ${kind}`);
    assert.ok(
      done.some((k) => k.startsWith('burst.')),
      'bursts',
    );
    assert.is(actor.counts.refused.get('rate_limited'), undefined, `kept under the limit (logs: ${logs.join(' | ')})`);
    assert.is(limited.stats.byAccount(account.id).rateLimited, 0);
    const renewals = account.all('invoices').filter((i) => i.billing_reason === 'subscription_cycle');
    assert.ok(
      renewals.some((i) => i.status === 'paid'),
      'a renewal invoice paid',
    );
    assert.ok(
      account.events().some((e) => e.type === 'invoice.payment_failed'),
      'a payment failed',
    );

    // Same seed, same answers (no 429 here): the same operations in the same order, as far as both got.
    const traces = runs.map((r) => (r.actor as unknown as { trace: string[] }).trace);
    const n = Math.min(traces[0]!.length, traces[1]!.length);
    assert.ok(n > 50);
    assert.equal(traces[0]!.slice(0, n), traces[1]!.slice(0, n));
  } finally {
    await limited.close();
  }
});

test.run();
