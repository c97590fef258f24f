/**
 * A Stripe sync is complete or says what is not: a list whose reads fail resumes from its
 * cursor and the status names it (and why) until it is read; a parent gone since it was listed
 * is no warning; a permission the key lacks is one, gone once the permission is granted.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SECTIONS } from '../fakes/stripe/auth.ts';
import { type FakeStripe, startFakeStripe } from '../fakes/stripe/index.ts';
import { tunablesFromEnv } from '../src/main.ts';
import { PARENTS_AT_ONCE } from '../src/stripe/backfill-plan.ts';
import { RECHECK_SKIPPED_MS } from '../src/stripe/runner.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, request, startTestService, type TestAccount, type TestService, waitBackfilled } from './harness/service.ts';

let fake: FakeStripe;
let svc: TestService;
let account: TestAccount;

test.before(async () => {
  fake = await startFakeStripe();
  svc = await startTestService({
    config: { roles: ['api', 'sync'] },
    tunables: { workerTickMs: 250, stripe: { pollIntervalMs: 500, recheckSkippedMs: 2000 } },
    stripeUrl: fake.url,
  });
  account = await createAccount(svc);
});

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

const view = async (id: string) => (await request(svc.api, 'GET', `/api/syncs/${id}`, { token: account.token })).body;

async function createSync(key: string) {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  return { id: created.body.id as string, reader: created.body.database.url as string, created: created.body };
}

const count = async (url: string, sql: string, params: unknown[] = []) => Number((await query<{ n: string }>(url, sql, params))[0]!.n);

/** Successful requests for exactly this path (its sub-paths left out). */
const exactly = (path: string) => {
  const all = fake.stats.byPath(path);
  const under = fake.stats.byPath(`${path}/`);
  return all.requests - all.rateLimited - (under.requests - under.rateLimited);
};

test('a list whose reads fail resumes from its cursor, and the status names it and why until it is read', async () => {
  const upstream = fake.createAccount();
  upstream.generate({ seed: 31, customers: 250 });
  const key = 'sk_test_RESUMERESUMERESUME0000';
  fake.addKey(key, { account: upstream.id });
  // The first page of customers is answered; the next eight requests of the list get a 500:
  // more than the client's six attempts, so the backfill fails once and starts again.
  const exact = /^\/v1\/customers$/;
  fake.faults.add({ match: { method: 'GET', path: exact, account: upstream.id }, kind: 'delay', delayMs: 1, times: 1 });
  fake.faults.add({ match: { method: 'GET', path: exact, account: upstream.id }, kind: 'status', status: 500, times: 8 });
  const before = exactly('/v1/customers');
  const sync = await createSync(key);

  const held = await waitFor(
    'the status to name the failing list',
    async () => (await view(sync.id)).status.incomplete.find((l: { list: string }) => l.list === '/v1/customers'),
    30_000,
  );
  assert.is(held.table, 'customer');
  assert.match(held.reason, /Stripe answered 500/);
  assert.ok(!Number.isNaN(Date.parse(held.since)));

  const done = await waitBackfilled(svc.api, account.token, sync.id, 120_000);
  assert.is(fake.faults.active, 0, 'every fault was met');
  assert.is(await count(sync.reader, 'SELECT count(*) AS n FROM public.customer'), upstream.count('customers'));
  assert.is(await count(sync.reader, 'SELECT count(DISTINCT id) AS n FROM public.customer'), upstream.count('customers'));
  // 250 customers are three pages: page one once, then two more, not page one again.
  assert.is(exactly('/v1/customers') - before - 8, 3, 'pages read, the 500s left out');
  assert.equal(done.status.incomplete, [], 'complete: nothing named any more');
  assert.equal(done.warnings, []);
  await request(svc.api, 'DELETE', `/api/syncs/${sync.id}`, { token: account.token });
});

test('a per-parent list whose reads fail resumes after the parents it read in full, not from the first', async () => {
  const upstream = fake.createAccount();
  upstream.generate({ seed: 34, customers: 150 });
  const key = 'sk_test_PARENTSRESUMEPARENTS00';
  fake.addKey(key, { account: upstream.id });
  // The 61st customer's payment methods fail all six attempts: the backfill fails once, with
  // the first 60 customers' lists read and a dozen after it in flight.
  const ids = upstream
    .all('customers')
    .map((c) => String(c.id))
    .sort();
  const lists = /^\/v1\/customers\/[^/]+\/payment_methods$/;
  fake.faults.add({ match: { method: 'GET', path: `/v1/customers/${ids[60]}/payment_methods`, account: upstream.id }, kind: 'status', status: 500, times: 6 });
  const answered = () =>
    fake.stats
      .paths()
      .filter(([path]) => lists.test(path))
      .reduce((n, [, c]) => n + c.requests - c.rateLimited, 0);
  const before = answered();
  const sync = await createSync(key);
  const done = await waitBackfilled(svc.api, account.token, sync.id, 120_000);
  assert.is(fake.faults.active, 0, 'every fault was met');
  assert.is(
    await count(sync.reader, 'SELECT count(*) AS n FROM public.payment_method WHERE customer IS NOT NULL'),
    upstream.all('payment_methods').filter((p) => p.customer).length,
  );
  // One request per customer, plus what was read again: the lists in flight when it failed.
  const customers = upstream.count('customers');
  const read = answered() - before - 6;
  assert.ok(read >= customers && read <= customers + 2 * PARENTS_AT_ONCE, `${read} requests for ${customers} customers' payment methods`);
  assert.equal(done.status.incomplete, []);
  await request(svc.api, 'DELETE', `/api/syncs/${sync.id}`, { token: account.token });
});

test("a customer gone between listing customers and reading its lists is no warning, and the others' lists are read", async () => {
  const upstream = fake.createAccount();
  upstream.generate({ seed: 32, customers: 30 });
  const key = 'sk_test_VANISHVANISHVANISH0000';
  fake.addKey(key, { account: upstream.id });
  const [gone, kept] = upstream.all('customers').map((c) => String(c.id)) as [string, string];
  // Its lists' requests are held long enough for the customer to vanish before they are answered.
  const under = new RegExp(`^/v1/customers/${gone}/`);
  fake.faults.add({ match: { method: 'GET', path: under, account: upstream.id }, kind: 'delay', delayMs: 3000, times: Infinity });
  const sync = await createSync(key);
  await waitFor('a request for a list of the customer', async () => (fake.stats.byPath(`/v1/customers/${gone}/`).requests > 0 ? true : undefined), 60_000);
  upstream.del('customers', gone);

  const done = await waitBackfilled(svc.api, account.token, sync.id, 120_000);
  fake.faults.clear();
  assert.equal(done.warnings, [], 'a vanished parent is no permission problem');
  assert.equal(done.status.incomplete, []);
  assert.is(done.status.indicator, 'normal');
  assert.is(done.status.last_error, null);
  // The other customers' payment methods were read after the 404 (the list was not given up).
  const attached = upstream.all('payment_methods').filter((p) => p.customer === kept).length;
  assert.ok(attached > 0, 'the kept customer has a payment method');
  assert.is(await count(sync.reader, 'SELECT count(*) AS n FROM public.payment_method WHERE customer = $1', [kept]), attached);
  // Still none a while later: nothing brings the warning back.
  await new Promise((r) => setTimeout(r, 3000));
  const later = await view(sync.id);
  assert.equal(later.warnings, []);
  assert.equal(later.status.incomplete, []);
  await request(svc.api, 'DELETE', `/api/syncs/${sync.id}`, { token: account.token });
});

test('a permission the key lacks is a warning naming it, gone once the permission is granted', async () => {
  const upstream = fake.createAccount();
  upstream.generate({ seed: 33, customers: 20 });
  const key = 'rk_test_NOPAYMENTMETHODS000000';
  const sections = ['billing', 'checkout', 'connect', 'webhook', 'issuing', 'terminal', 'treasury', 'radar', 'reporting', 'identity', 'tax'];
  const everything = [...sections, ...SECTIONS.core!];
  fake.addKey(key, { account: upstream.id, restricted: { read: everything.filter((g) => g !== 'payment_method') } });
  const sync = await createSync(key);
  // The first view that says the backfill completed already carries its warnings (read often,
  // so the moment between the two cannot slip by, as it did beside four other files).
  const done = await waitFor(
    'the backfill',
    async () => {
      const seen = await view(sync.id);
      return seen.status.completed_at ? seen : undefined;
    },
    120_000,
    10,
  );
  const warning = done.warnings.find((w: string) => w.startsWith('payment_method not synced'));
  assert.ok(warning, done.warnings.join('\n'));
  assert.match(warning, /rak_payment_method_read/);
  assert.ok(
    done.status.incomplete.some((l: { table: string; reason: string }) => l.table === 'payment_method' && /rak_payment_method_read/.test(l.reason)),
    JSON.stringify(done.status.incomplete),
  );
  assert.is(await count(sync.reader, 'SELECT count(*) AS n FROM public.payment_method WHERE customer IS NOT NULL'), 0);
  const others = done.warnings.filter((w: string) => !w.startsWith('payment_method not synced'));

  fake.addKey(key, { account: upstream.id, restricted: { read: everything } });
  const cleared = await waitFor(
    'the warning to go',
    async () => {
      const v = await view(sync.id);
      return v.warnings.some((w: string) => w.startsWith('payment_method not synced')) ? undefined : v;
    },
    30_000,
  );
  assert.equal(cleared.warnings, others, 'the other warnings, whose cause remains, stay');
  assert.not.ok(cleared.status.incomplete.some((l: { table: string }) => l.table === 'payment_method'));
  const attached = upstream.all('payment_methods').filter((p) => p.customer).length;
  assert.ok(attached > 0);
  assert.is(await count(sync.reader, 'SELECT count(*) AS n FROM public.payment_method WHERE customer IS NOT NULL'), attached);
  await request(svc.api, 'DELETE', `/api/syncs/${sync.id}`, { token: account.token });
});

test('the operator sets how often unreadable lists are read again; bad values are refused', () => {
  assert.is(RECHECK_SKIPPED_MS, 600_000);
  assert.equal(tunablesFromEnv({ TRIBUTARY_STRIPE_RECHECK_S: '60' }), { stripe: { recheckSkippedMs: 60_000 } });
  for (const bad of ['0', '9', '1.5', 'often', '86401']) {
    assert.throws(
      () => tunablesFromEnv({ TRIBUTARY_STRIPE_RECHECK_S: bad }),
      /TRIBUTARY_STRIPE_RECHECK_S: expected a whole number of seconds from 10 to 86400/,
      bad,
    );
  }
});

test.run();
