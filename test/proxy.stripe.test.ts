/**
 * The write-through proxy with Stripe: stripe-node with host/port/protocol set to the proxy
 * (bare /v1 paths) creates, updates, acts on and deletes objects; a SQL read right after
 * each answer sees the change; the account of a key other than the sync's is found once;
 * the answers are the fake's bytes. (Bursts against the quota: proxy.quota.test.ts.)
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { withDatabase } from '../src/db/sql.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { endToEnd, rawRequest, startProxy, startTap, type TestProxy } from './harness/proxy.ts';
import { createAccount, request, startTestService, STRIPE_TEST_KEYS, type TestAccount, type TestService, waitBackfilled } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let proxy: TestProxy;
let reader: string;
/** The sync database as its owner: public_swap is out of the reader's sight. */
let admin: string;
let stripe: Stripe;
let accountLookups = 0;

const SYNC_KEY = STRIPE_TEST_KEYS[0]!;
/** Another key of the same account: the proxy has to find out whose it is. */
const CLIENT_KEY = STRIPE_TEST_KEYS[1]!;

test.before(async () => {
  svc = await startTestService({ config: { roles: ['api', 'sync'] }, tunables: { workerTickMs: 250, stripe: { pollIntervalMs: 500 } } });
  account = await createAccount(svc);
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: SYNC_KEY } });
  assert.is(created.status, 201, created.text);
  reader = created.body.database.url;
  admin = withDatabase(serverAdminUrl(), created.body.database.name);
  await waitBackfilled(svc.api, account.token, created.body.id);
  proxy = await startProxy(svc);
  accountLookups = svc.stripe!.stats.byPath('/v1/account').requests;
  // Exactly as a user would: only host, port and protocol point at the proxy; stripe-node's own API version.
  stripe = new Stripe(CLIENT_KEY, { host: '127.0.0.1', port: proxy.port, protocol: 'http', maxNetworkRetries: 0 });
});

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
});

const one = async <R extends Record<string, unknown>>(table: string, id: string) =>
  (await query<R>(reader, `SELECT * FROM public.${table} WHERE id = $1`, [id]))[0];

test('stripe-node creates and updates customers through the proxy: rows are there when the answer arrives', async () => {
  const customer = await stripe.customers.create({ email: 'proxy@example.com', name: 'Proxy Person', metadata: { tier: 'gold' } });
  const row = await one<{ email: string; name: string; metadata: unknown }>('customer', customer.id);
  assert.ok(row, 'written before the answer');
  assert.equal([row!.email, row!.name, row!.metadata], ['proxy@example.com', 'Proxy Person', { tier: 'gold' }]);

  await stripe.customers.update(customer.id, { name: 'Renamed' });
  assert.is((await one<{ name: string }>('customer', customer.id))!.name, 'Renamed');

  // Found once, then remembered: the second key's account.
  assert.is(svc.stripe!.stats.byPath('/v1/account').requests, accountLookups + 1, 'one GET /v1/account for the new key');
});

test('products, prices, subscriptions (with their items inline), invoice actions, deletes', async () => {
  const customer = await stripe.customers.create({ email: 'buyer@example.com', payment_method: 'pm_card_visa' });
  const pm = (await stripe.customers.listPaymentMethods(customer.id)).data[0]!.id;
  await stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: pm } });
  const product = await stripe.products.create({ name: 'Seats' });
  assert.ok(await one('product', product.id));
  const price = await stripe.prices.create({ currency: 'usd', unit_amount: 1500, recurring: { interval: 'month' }, product: product.id });
  assert.is((await one<{ unit_amount: string }>('price', price.id))!.unit_amount, '1500');

  const sub = await stripe.subscriptions.create({ customer: customer.id, items: [{ price: price.id, quantity: 3 }] });
  const subRow = await one<{ status: string; customer: string }>('subscription', sub.id);
  assert.equal([subRow!.status, subRow!.customer], ['active', customer.id]);
  const items = await query<{ id: string; quantity: string }>(reader, 'SELECT id, quantity FROM public.subscription_item WHERE subscription = $1', [sub.id]);
  assert.equal(
    items.map((i) => [i.id, i.quantity]),
    [[sub.items.data[0]!.id, '3']],
    'the inline items list is written as its own rows',
  );

  await stripe.invoiceItems.create({ customer: customer.id, amount: 2500, currency: 'usd', description: 'Setup' });
  const draft = await stripe.invoices.create({ customer: customer.id, pending_invoice_items_behavior: 'include' });
  assert.is((await one<{ status: string }>('invoice', draft.id))!.status, 'draft');
  await stripe.invoices.finalizeInvoice(draft.id);
  assert.is((await one<{ status: string }>('invoice', draft.id))!.status, 'open');
  const paid = await stripe.invoices.pay(draft.id);
  assert.is(paid.status, 'paid');
  const invoiceRow = await one<{ status: string; amount_paid: string }>('invoice', draft.id);
  assert.equal([invoiceRow!.status, invoiceRow!.amount_paid], ['paid', '2500'], 'an action route is written through');

  // A preview computes and stores nothing: not written.
  const before = await query(reader, 'SELECT count(*) FROM public.invoice');
  const preview = await stripe.invoices.createPreview({ subscription: sub.id });
  assert.is(preview.object, 'invoice');
  assert.equal(await query(reader, 'SELECT count(*) FROM public.invoice'), before);

  const canceled = await stripe.subscriptions.cancel(sub.id);
  assert.is(canceled.status, 'canceled');
  assert.is((await one<{ status: string }>('subscription', sub.id))!.status, 'canceled', 'a cancel keeps the row');

  const gone = await stripe.customers.create({ email: 'gone@example.com' });
  assert.ok(await one('customer', gone.id));
  const deleted = await stripe.customers.del(gone.id);
  assert.is(deleted.deleted, true);
  assert.is(await one('customer', gone.id), undefined, 'deleted before the answer');
  const tombstone = await query<{ deleted: boolean }>(admin, "SELECT deleted FROM public_swap._stripe_versions WHERE tbl = 'customer' AND id = $1", [gone.id]);
  assert.equal(tombstone, [{ deleted: true }], 'a tombstone keeps a late event from bringing it back');
});

test('the events the sync reads later do not roll a proxied write back', async () => {
  const customer = await stripe.customers.create({ email: 'order@example.com', name: 'First' });
  await stripe.customers.update(customer.id, { name: 'Second' });
  await stripe.customers.update(customer.id, { name: 'Third' });
  // Give the sync's events feed (every 500 ms) time to apply customer.created and both updates.
  await new Promise((r) => setTimeout(r, 2500));
  assert.is((await one<{ name: string }>('customer', customer.id))!.name, 'Third');
});

test('curl-style basic auth and the /api.stripe.com prefix; answers are the upstream bytes', async () => {
  const tap = await startTap(svc.stripe!.url);
  const tapped = await startProxy(svc, {
    upstreams: new Map([
      ['api.airtable.com', svc.airtable.url],
      ['api.stripe.com', tap.url],
    ]),
  });
  try {
    const basic = {
      authorization: `Basic ${Buffer.from(`${CLIENT_KEY}:`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
      'stripe-version': STRIPE_API_VERSION,
    };
    const created = await rawRequest(tapped.url, 'POST', '/api.stripe.com/v1/customers', { headers: basic, body: 'email=tap%40example.com&metadata[a]=b' });
    assert.is(created.status, 200, created.body.toString());
    const sent = tap.records.find((r) => r.method === 'POST' && r.path === '/v1/customers')!;
    assert.ok(created.body.equals(sent.body), 'body bytes unchanged');
    assert.equal(endToEnd(created.rawHeaders), endToEnd(sent.rawHeaders));
    assert.ok(await one('customer', created.json.id));
    assert.ok(!tap.records.some((r) => r.path.startsWith(`/v1/customers/${created.json.id}`)), 'the pinned API version needs no second fetch');

    const missing = await rawRequest(tapped.url, 'GET', '/v1/customers/cus_nope', { headers: basic });
    assert.is(missing.status, 404);
    assert.ok(missing.body.equals(tap.records.at(-1)!.body));
  } finally {
    await tapped.stop();
    await tap.close();
  }
});

test('no key in the logs', async () => {
  assert.ok(svc.logs.lines.some((l) => /"part":"proxy"/.test(l)));
  for (const key of [SYNC_KEY, CLIENT_KEY]) assert.not.match(svc.logs.text, key);
});

test.run();
