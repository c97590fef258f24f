/**
 * The Stripe sync against the fake Stripe, through real HTTP: a backfill of a generated
 * account, then changes made with the official stripe client reaching the database from the
 * events feed, upcoming invoices, faults retried without loss, and the creation check.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../fakes/stripe/index.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { waitFor } from './harness/process.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { withDatabase } from '../src/db/sql.ts';
import { IDLE_AFTER_MS, IDLE_POLL_MAX_MS, nextPollGap } from '../src/stripe/runner.ts';
import { createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const KEY = 'sk_test_SYNCSYNCSYNCSYNC0123456789';
let fake: FakeStripe;
let upstream: FakeStripeAccount;
let svc: TestService;
let account: TestAccount;
let syncId: string;
let reader: string;
/** The sync database as the service sees it (its bookkeeping in public_swap). */
let admin: string;
let stripe: Stripe;

async function backfilled(id: string, timeoutMs = 120_000) {
  return waitFor(
    `the backfill of ${id}`,
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${id}`, { token: account.token });
      return answer.body.status.completed_at ? answer.body : undefined;
    },
    timeoutMs,
  ).catch((error) => {
    console.error(svc.logs.text.split('\n').slice(-30).join('\n'));
    throw error;
  });
}

async function count(table: string, url = reader): Promise<number> {
  const rows = await query<{ n: string }>(url, `SELECT count(*) AS n FROM public.${table}`);
  return Number(rows[0]!.n);
}

/** Waits for a query to return what `accept` wants; returns how long it took. */
async function within(sql: string, params: unknown[], accept: (rows: any[]) => boolean, timeoutMs = 5000): Promise<number> {
  const started = Date.now();
  await waitFor(sql, async () => (accept(await query(reader, sql, params)) ? true : undefined), timeoutMs);
  return Date.now() - started;
}

test.before(async () => {
  fake = await startFakeStripe();
  upstream = fake.createAccount();
  upstream.generate({ seed: 3, customers: 60 });
  fake.addKey(KEY, { account: upstream.id });
  svc = await startTestService({ config: { roles: ['api', 'sync'] }, tunables: { workerTickMs: 250, stripe: { pollIntervalMs: 500 } }, stripeUrl: fake.url });
  account = await createAccount(svc);
  const url = new URL(fake.url);
  stripe = new Stripe(KEY, { host: url.hostname, port: Number(url.port), protocol: 'http', apiVersion: STRIPE_API_VERSION as never });
  // The account uses Entitlements: its subscribed customers may have active entitlements.
  await stripe.entitlements.features.create({ name: 'Seats', lookup_key: 'seats' });
});

/** Requests for customers' active entitlements so far (429s not counted), across accounts. */
function entitlementRequests(): number {
  const asked = fake.stats.byPath('/v1/entitlements/active_entitlements');
  return asked.requests - asked.rateLimited;
}

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test('creating a sync checks the key: a bad key is a 422, a restricted key is told what it cannot read', async () => {
  const bad = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: 'sk_test_NOSUCHKEY000000' } });
  assert.is(bad.status, 422);
  assert.match(bad.body.error.message, /Stripe key was rejected/);

  fake.addKey('rk_test_RESTRICTED00000000', {
    account: upstream.id,
    restricted: { read: ['customers', 'checkout_sessions', 'subscriptions', 'balance_transactions', 'charges'] },
  });
  const limited = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: 'rk_test_RESTRICTED00000000' } });
  assert.is(limited.status, 201, limited.text);
  assert.ok(limited.body.warnings.length > 0, 'warnings name what is skipped');
  assert.ok(
    limited.body.warnings.some((w: string) => /issuing/.test(w)),
    limited.body.warnings.join('\n'),
  );
  const gone = await request(svc.api, 'DELETE', `/api/syncs/${limited.body.id}`, { token: account.token });
  assert.is(gone.status, 200);
});

test('a backfill lands every object of the account in its table', async () => {
  const entitlementsBefore = entitlementRequests();
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: KEY } });
  assert.is(created.status, 201, created.text);
  syncId = created.body.id;
  reader = created.body.database.url;
  admin = withDatabase(serverAdminUrl(), created.body.database.name);
  assert.equal(created.body.warnings, []);
  const view = await backfilled(syncId);
  assert.is(view.status.last_error, null);
  for (const [table, resource] of [
    ['customer', 'customers'],
    ['product', 'products'],
    ['price', 'prices'],
    ['subscription', 'subscriptions'],
    ['subscription_item', 'subscription_items'],
    ['invoice', 'invoices'],
    ['payment_intent', 'payment_intents'],
    ['charge', 'charges'],
    ['refund', 'refunds'],
    ['balance_transaction', 'balance_transactions'],
    ['payment_method', 'payment_methods'],
  ] as const) {
    const upstreamCount = upstream.count(resource);
    assert.ok(upstreamCount > 0, `the generated account has ${resource}`);
    assert.is(await count(table), upstreamCount, `${table} rows = ${resource} upstream`);
  }
  // Typed columns: unix times as timestamptz, amounts as bigint, references as ids.
  const [charge] = await query<any>(reader, 'SELECT id, amount, currency, created, customer, paid FROM public.charge ORDER BY id LIMIT 1');
  const original = upstream.get('charges', charge.id)!;
  assert.is(Number(charge.amount), original.amount);
  assert.is(charge.currency, original.currency);
  assert.is(charge.created.getTime(), (original.created as number) * 1000);
  assert.is(charge.customer, original.customer);
  // Entitlements come only with a live subscription: asked for each such customer once, and
  // only once the subscriptions are all in (asked earlier, customers not yet seen were missed).
  const [live] = await query<{ n: number }>(
    reader,
    "SELECT count(DISTINCT customer)::int AS n FROM public.subscription WHERE status NOT IN ('canceled', 'incomplete_expired')",
  );
  assert.ok(live!.n > 0);
  assert.is(await count('entitlements_feature'), 1, 'the feature landed');
  assert.is(entitlementRequests() - entitlementsBefore, live!.n, 'active entitlements asked per customer with a live subscription');
  const meta = await query<any>(reader, 'SELECT started_at, completed_at FROM public._sync_meta');
  assert.ok(meta[0].completed_at >= meta[0].started_at);
  // Upcoming invoices of subscribed customers are fetched after the backfill.
  await within('SELECT count(*)::int AS n FROM public.upcoming_subscription_invoice', [], (rows) => rows[0].n > 0, 60_000);
});

test('creates, updates and deletes made through the API reach the database within a second', async () => {
  const customer = await stripe.customers.create({ email: 'new@example.com', name: 'New Customer', metadata: { tier: 'gold' } });
  const createLag = await within('SELECT email FROM public.customer WHERE id = $1', [customer.id], (rows) => rows[0]?.email === 'new@example.com');
  await stripe.customers.update(customer.id, { name: 'Renamed', metadata: { tier: 'platinum' } });
  const updateLag = await within(
    'SELECT name, metadata FROM public.customer WHERE id = $1',
    [customer.id],
    (rows) => rows[0]?.name === 'Renamed' && rows[0]?.metadata.tier === 'platinum',
  );
  await stripe.customers.del(customer.id);
  const deleteLag = await within('SELECT 1 FROM public.customer WHERE id = $1', [customer.id], (rows) => rows.length === 0);
  for (const [what, ms] of [
    ['create', createLag],
    ['update', updateLag],
    ['delete', deleteLag],
  ] as const) {
    assert.ok(ms <= 1500, `${what} took ${ms} ms`);
  }

  // A canceled subscription stays, with its status.
  const [sub] = await query<any>(reader, "SELECT id FROM public.subscription WHERE status = 'active' ORDER BY id LIMIT 1");
  await stripe.subscriptions.cancel(sub.id);
  await within('SELECT status FROM public.subscription WHERE id = $1', [sub.id], (rows) => rows[0]?.status === 'canceled');
});

test("a customer's new address reaches its subscriptions' upcoming invoices", async () => {
  const [row] = await query<any>(
    reader,
    "SELECT u.subscription_id, s.customer FROM public.upcoming_subscription_invoice u JOIN public.subscription s ON s.id = u.subscription_id WHERE s.status = 'active' ORDER BY 1 LIMIT 1",
  );
  await stripe.customers.update(row.customer, { address: { city: 'Lisbon', country: 'PT', postal_code: '1100-148' } });
  await within(
    'SELECT customer_address FROM public.upcoming_subscription_invoice WHERE subscription_id = $1',
    [row.subscription_id],
    (rows) => rows[0]?.customer_address?.city === 'Lisbon',
    // Behind the previews the backfill queued, a few a second.
    60_000,
  );
});

test('a preview queue that went quiet wakes at the next event that marks one, not after its safety pause', async () => {
  // The previews the backfill queued are done, and the loop that fetches them sits idle.
  await waitFor(
    'the preview queue drained',
    async () => {
      const [due] = await query<{ n: number }>(admin, 'SELECT count(*)::int AS n FROM public_swap._stripe_upcoming_due');
      return due!.n === 0 ? true : undefined;
    },
    120_000,
  );
  await new Promise((r) => setTimeout(r, 2000));
  const [row] = await query<any>(
    reader,
    "SELECT u.subscription_id, s.customer FROM public.upcoming_subscription_invoice u JOIN public.subscription s ON s.id = u.subscription_id WHERE s.status = 'active' ORDER BY 1 DESC LIMIT 1",
  );
  await stripe.customers.update(row.customer, { address: { city: 'Porto', country: 'PT', postal_code: '4000-001' } });
  // The idle pause is 30 s: only the feed's wake brings the preview this soon.
  const took = await within(
    'SELECT customer_address FROM public.upcoming_subscription_invoice WHERE subscription_id = $1',
    [row.subscription_id],
    (rows) => rows[0]?.customer_address?.city === 'Porto',
    15_000,
  );
  assert.ok(took < 15_000, `${took} ms`);
});

test('an account without events is read less often, back to the normal pace at its next event', () => {
  const busy = { intervalMs: 500, previousGapMs: 500, sinceEventMs: 1000 };
  assert.is(nextPollGap(busy), 500);
  let gap = 500;
  const gaps: number[] = [];
  for (let i = 0; i < 6; i++) gaps.push((gap = nextPollGap({ intervalMs: 500, previousGapMs: gap, sinceEventMs: IDLE_AFTER_MS + i })));
  assert.equal(gaps, [1000, 2000, IDLE_POLL_MAX_MS, IDLE_POLL_MAX_MS, IDLE_POLL_MAX_MS, IDLE_POLL_MAX_MS]);
  assert.ok(IDLE_POLL_MAX_MS <= 4000, 'a change on an idle account still arrives within 5 s');
  assert.is(nextPollGap({ intervalMs: 500, previousGapMs: IDLE_POLL_MAX_MS, sinceEventMs: 0 }), 500, 'an event: the normal pace');
  assert.is(nextPollGap({ intervalMs: 60_000, previousGapMs: 60_000, sinceEventMs: IDLE_AFTER_MS * 2 }), 60_000, 'never quicker than the interval set');
});

test("finalizing an invoice moves its customer's next_invoice_sequence, which has no event of its own", async () => {
  const customer = await stripe.customers.create({ email: 'numbered@example.com' });
  await stripe.invoiceItems.create({ customer: customer.id, amount: 1250, currency: 'usd' });
  const invoice = await stripe.invoices.create({ customer: customer.id, pending_invoice_items_behavior: 'include' });
  await stripe.invoices.finalizeInvoice(invoice.id!);
  const sequence = upstream.get('customers', customer.id)!.next_invoice_sequence;
  assert.is(sequence, 2);
  await within('SELECT next_invoice_sequence::int AS n FROM public.customer WHERE id = $1', [customer.id], (rows) => rows[0]?.n === sequence);
});

test('a customer deleted right after its invoice is finalized stays deleted: the refetch finds a deleted stub', async () => {
  const customer = await stripe.customers.create({ email: 'short-lived@example.com' });
  await within('SELECT 1 FROM public.customer WHERE id = $1', [customer.id], (rows) => rows.length === 1);
  // Both events in one page of the feed: the page's invoice.finalized fetches the customer
  // again, after its customer.deleted, and Stripe answers a deleted customer with a stub.
  fake.faults.add({ match: { path: '/v1/events', account: upstream.id }, kind: 'status', status: 500, times: Infinity });
  await new Promise((r) => setTimeout(r, 500));
  await stripe.invoiceItems.create({ customer: customer.id, amount: 900, currency: 'usd' });
  const invoice = await stripe.invoices.create({ customer: customer.id, pending_invoice_items_behavior: 'include' });
  await stripe.invoices.finalizeInvoice(invoice.id!);
  await stripe.customers.del(customer.id);
  fake.faults.clear();
  await within('SELECT 1 FROM public.customer WHERE id = $1', [customer.id], (rows) => rows.length === 0);
  // A few polls later, still gone.
  await new Promise((r) => setTimeout(r, 2000));
  assert.equal(await query(reader, 'SELECT id FROM public.customer WHERE id = $1', [customer.id]), [], 'no row came back');
});

test('a product renamed through the API lands, and the sync reports no error', async () => {
  const [row] = await query<any>(reader, 'SELECT id, name FROM public.product ORDER BY id LIMIT 1');
  await stripe.products.update(row.id, { name: 'Newest name' });
  await within('SELECT name FROM public.product WHERE id = $1', [row.id], (rows) => rows[0]?.name === 'Newest name');
  const view = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.is(view.body.status.last_error, null);
});

test('when the events cursor falls out of the 30-day feed, a new backfill catches up and removes what it did not see', async () => {
  const [gone] = await query<any>(reader, 'SELECT id FROM public.customer WHERE id NOT IN (SELECT customer FROM public.subscription) ORDER BY id LIMIT 1');
  // The feed goes dark while a customer is deleted and two months pass: its event is never read.
  fake.faults.add({ match: { path: '/v1/events', account: upstream.id }, kind: 'status', status: 500, times: Infinity });
  await new Promise((r) => setTimeout(r, 1000));
  upstream.del('customers', gone.id);
  fake.clock.advance(62 * 86_400_000);
  const before = (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body.status.completed_at;
  fake.faults.clear();
  await within('SELECT 1 FROM public.customer WHERE id = $1', [gone.id], (rows) => rows.length === 0, 90_000).catch((error) => {
    console.error(
      svc.logs.lines
        .filter((l) => !l.includes('"level":20'))
        .slice(-25)
        .join('\n'),
    );
    throw error;
  });
  // The removal comes at the end of the new backfill, just before it records its completion.
  await waitFor(
    'the new backfill to complete',
    async () => {
      const view = (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body;
      return Date.parse(view.status.completed_at) > Date.parse(before) ? true : undefined;
    },
    10_000,
  );
  assert.is(await count('customer'), upstream.count('customers'));
  assert.match(svc.logs.text, /events feed out of reach; backfilling again/);
});

test('events rendered in an older account API version are fetched again in the pinned one', async () => {
  const old = fake.createAccount({ apiVersion: '2024-06-20' });
  old.generate({ seed: 19, customers: 10 });
  const key = 'sk_test_OLDVERSIONOLDVERSION000';
  fake.addKey(key, { account: old.id });
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  await backfilled(created.body.id);
  const id = old.all('customers')[0]!.id as string;
  const fetchedBefore = fake.stats.byPath(`/v1/customers/${id}`).requests;
  old.update('customers', id, { name: 'Seen in the pinned version' });
  assert.is(old.events()[0]!.api_version, '2024-06-20');
  const url = created.body.database.url;
  await waitFor(
    'the update',
    async () => ((await query<any>(url, 'SELECT name FROM public.customer WHERE id = $1', [id]))[0]?.name === 'Seen in the pinned version' ? true : undefined),
    10_000,
  );
  assert.ok(fake.stats.byPath(`/v1/customers/${id}`).requests > fetchedBefore, 'the customer was fetched by id');
  await request(svc.api, 'DELETE', `/api/syncs/${created.body.id}`, { token: account.token });
});

test('429s and 5xx while backfilling are retried, and nothing is lost', async () => {
  const other = fake.createAccount();
  other.generate({ seed: 11, customers: 40 });
  const key = 'sk_test_FAULTYFAULTYFAULTY000000';
  fake.addKey(key, { account: other.id });
  fake.faults.add({ match: { method: 'GET', path: '/v1/customers', account: other.id }, kind: 'status', status: 500, times: 3 });
  fake.faults.add({ match: { method: 'GET', path: '/v1/invoices', account: other.id }, kind: 'status', status: 429, times: 3 });
  fake.faults.add({ match: { method: 'GET', path: '/v1/charges', account: other.id }, kind: 'truncate', times: 2 });
  const entitlementsBefore = entitlementRequests();
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  await backfilled(created.body.id);
  const url = created.body.database.url;
  // This account has no entitlement feature, so no customer can have an active entitlement:
  // not one request per subscribed customer to find that out.
  assert.ok(other.count('subscriptions') > 0);
  assert.is(await count('entitlements_feature', url), 0);
  assert.is(entitlementRequests() - entitlementsBefore, 0, 'no customer asked for entitlements');
  assert.is(await count('customer', url), other.count('customers'));
  assert.is(await count('invoice', url), other.count('invoices'));
  assert.is(await count('charge', url), other.count('charges'));
});

test.run();
