/**
 * A Stripe backfill loads the tables a new user queries first (customer, product, price,
 * subscription, invoice) before the others, and its progress says which tables are still
 * loading: the core tables are ready while most lists, and every per-customer list, are not.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type FakeStripe, startFakeStripe } from '../fakes/stripe/index.ts';
import { query } from './harness/postgres.ts';
import { createAccount, request, startTestService, type TestAccount, type TestService, waitBackfilled } from './harness/service.ts';

// The console's own rendering of a status (browser JavaScript, untyped).
const consoleStatus: { progressOf(status: unknown): { label: string; detail?: string } | null } = await import(
  new URL('../src/console/status.js', import.meta.url).href
);

const CORE = ['customer', 'product', 'price', 'subscription', 'invoice'];
let fake: FakeStripe;
let svc: TestService;
let account: TestAccount;

test.before(async () => {
  fake = await startFakeStripe();
  svc = await startTestService({ config: { roles: ['api', 'sync'] }, tunables: { workerTickMs: 250 }, stripeUrl: fake.url });
  account = await createAccount(svc);
});

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test('the core tables are complete within 0.3 of the time, and the progress names the tables still loading', async () => {
  const upstream = fake.createAccount();
  // 100 customers: 200 per-customer lists after about 80 top-level ones, some 14 s at the sync's share.
  upstream.generate({ seed: 44, customers: 100 });
  const key = 'sk_test_COREFIRSTCOREFIRST000';
  fake.addKey(key, { account: upstream.id });
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  const id = created.body.id as string;

  const seen: Array<{ at: number; lists_done: number; lists_total: number; tables_total: number; tables_pending: string[] }> = [];
  // The core tables' row counts, sampled from the database itself: when they were complete is
  // read from the data, not from the progress (written once a second, then polled, which on a
  // loaded machine once put the moment a second late: 0.30 of a 14 s backfill).
  const reader = created.body.database.url as string;
  const countCore = async () =>
    (
      await query<{ counts: number[] }>(reader, `SELECT ARRAY[${CORE.map((t) => `(SELECT count(*)::int FROM public.${t})`).join(', ')}] AS counts`).catch(
        () => [{ counts: [] as number[] }],
      )
    )[0]!.counts;
  const counted: Array<{ at: number; counts: number[] }> = [];
  let startedAt = 0;
  let doneAt = 0;
  while (!doneAt) {
    counted.push({ at: Date.now(), counts: await countCore() });
    const view = (await request(svc.api, 'GET', `/api/syncs/${id}`, { token: account.token })).body;
    const p = view.status.progress;
    // The backfill's own time, as the status gives it (the service runs on this machine's clock).
    // Its first start only: on a busy machine the next cycle can start before this loop sees
    // the backfill's completion, and its start made the backfill look 0.8% as long.
    if (view.status.started_at && !startedAt) startedAt = Date.parse(view.status.started_at);
    if (view.status.completed_at) doneAt = Date.parse(view.status.completed_at);
    else if (p?.phase === 'backfill' && Array.isArray(p.tables_pending)) seen.push({ ...p, at: Date.now() });
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(seen.length >= 3, `progress seen ${seen.length} times`);
  const coreReady = seen.find((p) => !CORE.some((t) => p.tables_pending.includes(t)));
  assert.ok(coreReady, 'the core tables were seen complete before the backfill was');
  // Complete: the first sample from which every core table holds what it holds at the end.
  const final = await countCore();
  const firstComplete = counted.find((_c, i) => counted.slice(i).every((later) => later.counts.join() === final.join()));
  assert.ok(firstComplete, `the core tables reached their final counts ${final.join(', ')}`);
  const share = (firstComplete.at - startedAt) / (doneAt - startedAt);
  assert.ok(share < 0.3, `the core tables were complete after ${share.toFixed(2)} of the backfill's time`);
  for (const table of ['payment_method', 'customer_balance_transaction']) assert.ok(coreReady.tables_pending.includes(table), `${table} still loading`);
  // The names are the tables of the database, and every table was pending or ready, none lost.
  const tables = (await query<{ t: string }>(reader, "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public'")).map((r) => r.t);
  for (const t of coreReady.tables_pending) assert.ok(tables.includes(t), `${t} is a table`);
  assert.ok(coreReady.tables_total > CORE.length + coreReady.tables_pending.length - 1);
  // The console says how many tables are ready and names the first still loading.
  const shown = consoleStatus.progressOf({ progress: coreReady })!;
  const ready = coreReady.tables_total - coreReady.tables_pending.length;
  assert.match(shown.label, new RegExp(`; ${ready} of ${coreReady.tables_total} tables ready$`));
  assert.match(shown.detail ?? '', new RegExp(`^Still loading: ${coreReady.tables_pending.slice(0, 6).join(', ')}`));

  const done = await waitBackfilled(svc.api, account.token, id);
  assert.not.ok(done.status.progress?.tables_pending?.length, 'nothing is loading once the backfill is complete');
});

test.run();
