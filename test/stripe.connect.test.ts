/**
 * Connected accounts (`connected_accounts: true`): a platform's connected accounts are found,
 * backfilled and followed through their own feeds into the same tables, each row with its
 * account in `stripe_account`; ids the accounts chose alike stay apart; a wait covers them; a
 * new account is picked up, a deleted one removed with its rows, and turning the setting off
 * removes them all. A key that may not read Connect gets a warning naming the permission while
 * the platform's own data still syncs.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query } from './harness/postgres.ts';
import { startProxy } from './harness/proxy.ts';
import { waitFor } from './harness/process.ts';
import { request, waitBackfilled } from './harness/service.ts';
import { backfilledStripeSync, politely, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const KEY = 'sk_test_CONNECTPLATFORMCONNECT01';
const NO_CONNECT = 'rk_test_CONNECTNOCONNECTREAD0002';
let s: StripeSyncSetUp;
const accounts: Record<'a' | 'b', string> = { a: '', b: '' };

test.before(async () => {
  s = await backfilledStripeSync({
    key: KEY,
    seed: 61,
    customers: 4,
    pollIntervalMs: 300,
    settings: { connected_accounts: true },
    tunables: { stripe: { pollIntervalMs: 300, discoverAccountsMs: 3000 } },
    before: async (stripe) => {
      await stripe.products.create({ id: 'gold', name: 'Platform gold' });
      for (const name of ['a', 'b'] as const) {
        const account = await stripe.accounts.create({ type: 'custom', email: `${name}@example.com` });
        accounts[name] = account.id;
        await stripe.products.create({ id: 'gold', name: `Gold of ${name}` }, { stripeAccount: account.id });
        await stripe.customers.create({ email: `first@${name}.example.com` }, { stripeAccount: account.id });
      }
    },
  });
});
test.after(async () => {
  await s.svc.stop();
  await s.fake.close();
});

const rows = <T extends Record<string, unknown> = Record<string, any>>(sql: string, params: unknown[] = []) => query<T>(s.reader, sql, params);
const until = <T>(what: string, read: () => Promise<T | undefined>) => waitFor(what, read, 20_000);

test("each connected account's objects land in the same tables, with its id; ids chosen alike stay apart", async () => {
  await until('both accounts backfilled', async () => {
    const found = await rows("SELECT stripe_account FROM public.customer WHERE email LIKE 'first@%'");
    const golds = await rows("SELECT 1 FROM public.product WHERE id = 'gold'");
    return found.length === 2 && golds.length === 3 ? true : undefined;
  });
  assert.equal(await rows("SELECT email, stripe_account FROM public.customer WHERE email LIKE 'first@%' ORDER BY email"), [
    { email: 'first@a.example.com', stripe_account: accounts.a },
    { email: 'first@b.example.com', stripe_account: accounts.b },
  ]);
  assert.equal(await rows("SELECT _key, stripe_account, name FROM public.product WHERE id = 'gold' ORDER BY name"), [
    { _key: `${accounts.a}/gold`, stripe_account: accounts.a, name: 'Gold of a' },
    { _key: `${accounts.b}/gold`, stripe_account: accounts.b, name: 'Gold of b' },
    { _key: 'gold', stripe_account: null, name: 'Platform gold' },
  ]);
  // The platform's own objects are its own: no account.
  const platform = await rows<{ n: string }>('SELECT count(*) AS n FROM public.customer WHERE stripe_account IS NULL');
  assert.is(Number(platform[0]!.n), s.upstream.all('customers').length);
  // The accounts themselves are rows of `account`, the platform's.
  assert.equal(
    (await rows('SELECT id FROM public.account WHERE stripe_account IS NULL ORDER BY id')).map((r) => r.id),
    [accounts.a, accounts.b].sort(),
  );
});

test('a change in a connected account arrives from its feed, and its event carries stripe_account', async () => {
  const [customer] = (await s.stripe.customers.list({ limit: 1 }, { stripeAccount: accounts.a })).data;
  await politely(() => s.stripe.customers.update(customer!.id, { name: 'Renamed in A' }, { stripeAccount: accounts.a }));
  await until('the update', async () =>
    (await rows('SELECT name FROM public.customer WHERE id = $1', [customer!.id]))[0]?.name === 'Renamed in A' ? true : undefined,
  );
  const [event] = await until('its event', async () => {
    const found = await query<{ value: string }>(
      s.svc.controlUrl,
      "SELECT value FROM events WHERE sync_id = $1 AND value::jsonb->>'id' = $2 AND value::jsonb->'data'->>'name' = 'Renamed in A'",
      [s.syncId, customer!.id],
    );
    return found.length > 0 ? found : undefined;
  });
  const parsed = JSON.parse(event!.value) as { event: string; data: Record<string, unknown>; changes: Record<string, unknown> };
  assert.is(parsed.event, 'updated');
  assert.is(parsed.data.stripe_account, accounts.a);
  assert.ok('name' in parsed.changes);
});

test("a wait covers the connected accounts' feeds, and accounts connected just before it", async () => {
  const created = await politely(() => s.stripe.customers.create({ email: 'waited@b.example.com' }, { stripeAccount: accounts.b }));
  const waited = await request(s.svc.api, 'GET', `/api/wait/${s.syncId}?timeout=20000`, { token: s.account.token });
  assert.is(waited.body.ok, true);
  assert.equal(await rows('SELECT stripe_account FROM public.customer WHERE id = $1', [created.id]), [{ stripe_account: accounts.b }]);
  // A new account is not found by its own feed: the wait lists the accounts again.
  const d = await politely(() => s.stripe.accounts.create({ type: 'standard' }));
  const first = await politely(() => s.stripe.customers.create({ email: 'first@d.example.com' }, { stripeAccount: d.id }));
  const again = await request(s.svc.api, 'GET', `/api/wait/${s.syncId}?timeout=20000`, { token: s.account.token });
  assert.is(again.body.ok, true);
  assert.equal(await rows('SELECT stripe_account FROM public.customer WHERE id = $1', [first.id]), [{ stripe_account: d.id }]);
  await politely(() => s.stripe.accounts.del(d.id));
});

test("a write through the proxy on behalf of a connected account is that account's row when the answer arrives", async () => {
  const proxy = await startProxy(s.svc, { upstreams: new Map([['api.stripe.com', s.fake.url]]) });
  try {
    // As a platform's backend would: only host, port and protocol point at the proxy.
    const viaProxy = new Stripe(KEY, { host: '127.0.0.1', port: proxy.port, protocol: 'http', maxNetworkRetries: 0 });
    const created = await viaProxy.customers.create({ email: 'proxied@a.example.com' }, { stripeAccount: accounts.a });
    assert.equal(await rows('SELECT email, stripe_account FROM public.customer WHERE id = $1', [created.id]), [
      { email: 'proxied@a.example.com', stripe_account: accounts.a },
    ]);
    await viaProxy.customers.update(created.id, { name: 'Proxied' }, { stripeAccount: accounts.a });
    assert.equal(await rows('SELECT name FROM public.customer WHERE id = $1', [created.id]), [{ name: 'Proxied' }]);
    // An id the platform uses too: the account's row changes, not the platform's.
    await viaProxy.products.update('gold', { name: 'Gold of a, via the proxy' }, { stripeAccount: accounts.a });
    assert.equal(await rows("SELECT _key, name FROM public.product WHERE id = 'gold' AND name LIKE 'Gold of a%' OR _key = 'gold' ORDER BY _key"), [
      { _key: `${accounts.a}/gold`, name: 'Gold of a, via the proxy' },
      { _key: 'gold', name: 'Platform gold' },
    ]);
  } finally {
    await proxy.stop();
  }
});

test('a new connected account is picked up; a deleted one is removed with its rows', async () => {
  const c = await politely(() => s.stripe.accounts.create({ type: 'express' }));
  const customer = await politely(() => s.stripe.customers.create({ email: 'first@c.example.com' }, { stripeAccount: c.id }));
  await until('the new account backfilled', async () =>
    (await rows('SELECT 1 FROM public.customer WHERE id = $1', [customer.id])).length > 0 ? true : undefined,
  );
  await politely(() => s.stripe.accounts.del(accounts.b));
  // The account's own row goes last, once its rows of every table are gone (a transaction a table).
  await until("the deleted account's rows and its own row gone", async () =>
    (await rows('SELECT 1 FROM public.customer WHERE stripe_account = $1 UNION ALL SELECT 1 FROM public.account WHERE id = $1', [accounts.b])).length === 0
      ? true
      : undefined,
  );
  assert.equal(await rows("SELECT _key FROM public.product WHERE id = 'gold' ORDER BY _key"), [{ _key: `${accounts.a}/gold` }, { _key: 'gold' }]);
  const deletions = await query<{ n: string }>(
    s.svc.controlUrl,
    "SELECT count(*) AS n FROM events WHERE sync_id = $1 AND value::jsonb->>'event' = 'deleted' AND value::jsonb->'data'->>'stripe_account' = $2",
    [s.syncId, accounts.b],
  );
  assert.ok(Number(deletions[0]!.n) >= 2, 'each removed row is a deletion event');
});

test("new backfills after the feeds fell out of reach remove what each account lost, and nothing of another's", async () => {
  const keep = await politely(() => s.stripe.customers.create({ email: 'keep@a.example.com' }, { stripeAccount: accounts.a }));
  const lose = await politely(() => s.stripe.customers.create({ email: 'lose@a.example.com' }, { stripeAccount: accounts.a }));
  await until('both in the database', async () =>
    (await rows('SELECT 1 FROM public.customer WHERE id = ANY($1)', [[keep.id, lose.id]])).length === 2 ? true : undefined,
  );
  const platformBefore = (await rows('SELECT id FROM public.customer WHERE stripe_account IS NULL ORDER BY id')).map((r) => r.id);
  const view = await s.view();
  // Every feed goes dark for 31 days; meanwhile one of A's customers is deleted.
  s.fake.faults.add({ match: { path: '/v1/events', account: s.upstream.id }, kind: 'status', status: 500, times: Infinity });
  await new Promise((r) => setTimeout(r, 800));
  s.fake.clock.advance(31 * 86_400_000);
  await politely(() => s.stripe.customers.del(lose.id, {}, { stripeAccount: accounts.a }));
  s.fake.faults.clear();
  await waitFor(
    "the platform's new backfill",
    async () => (Date.parse((await s.view()).status.completed_at) > Date.parse(view.status.completed_at) ? true : undefined),
    60_000,
  );
  await until("A's new backfill removes the customer it lost", async () =>
    (await rows('SELECT 1 FROM public.customer WHERE id = $1', [lose.id])).length === 0 ? true : undefined,
  );
  assert.equal(await rows('SELECT stripe_account FROM public.customer WHERE id = $1', [keep.id]), [{ stripe_account: accounts.a }]);
  assert.equal(
    (await rows('SELECT id FROM public.customer WHERE stripe_account IS NULL ORDER BY id')).map((r) => r.id),
    platformBefore,
  );
  assert.equal((await rows("SELECT _key FROM public.product WHERE id = 'gold' ORDER BY _key")).length, 2, "A's gold and the platform's");
});

test('turning the setting off removes every connected account; the accounts stay rows of the platform', async () => {
  const patched = await request(s.svc.api, 'PATCH', `/api/syncs/${s.syncId}`, { token: s.account.token, body: { settings: { connected_accounts: false } } });
  assert.is(patched.status, 200);
  assert.is(patched.body.settings.connected_accounts, false);
  await until('connected rows gone', async () =>
    (await rows('SELECT 1 FROM public.customer WHERE stripe_account IS NOT NULL')).length === 0 ? true : undefined,
  );
  assert.ok((await rows('SELECT 1 FROM public.customer WHERE stripe_account IS NULL')).length > 0, "the platform's own stay");
  assert.ok((await rows('SELECT 1 FROM public.account WHERE id = $1', [accounts.a])).length === 1);
});

test('a key without Connect read: a warning naming the permission, and the platform still syncs', async () => {
  s.fake.addKey(NO_CONNECT, { account: s.upstream.id, restricted: { read: ['core', 'billing', 'checkout', 'payment_method'], write: [] } });
  const created = await request(s.svc.api, 'POST', '/api/syncs', {
    token: s.account.token,
    body: { kind: 'stripe', api_key: NO_CONNECT, settings: { connected_accounts: true } },
  });
  assert.is(created.status, 201, created.text);
  await waitBackfilled(s.svc.api, s.account.token, created.body.id);
  const view = await until('the warning', async () => {
    const v = (await request(s.svc.api, 'GET', `/api/syncs/${created.body.id}`, { token: s.account.token })).body;
    return (v.warnings as string[]).some((w: string) => w.startsWith('connected accounts are not synced')) ? v : undefined;
  });
  const warning = (view.warnings as string[]).find((w: string) => w.startsWith('connected accounts are not synced')) as string;
  assert.match(warning, /rak_connect_read|connect/i, 'it names the permission');
  const platform = await query<{ n: string }>(created.body.database.url, 'SELECT count(*) AS n FROM public.customer');
  assert.ok(Number(platform[0]!.n) > 0, "the platform's own customers are synced");
});

test.run();
