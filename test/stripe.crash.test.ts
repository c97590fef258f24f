/**
 * A Stripe backfill cut short by SIGKILL resumes where it stopped: no gap (every object
 * arrives), no duplicate, and the lists already read are not read again.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../fakes/stripe/index.ts';
import { freshDatabase, query, serverAdminUrl } from './harness/postgres.ts';
import { freePort } from './harness/ports.ts';
import { type Spawned, spawnTributary, waitFor } from './harness/process.ts';
import { request } from './harness/service.ts';

const KEY = 'sk_test_CRASHCRASHCRASH0000000';
const ADMIN = 'tra_test_stripe_crash_admin_token';
let fake: FakeStripe;
let upstream: FakeStripeAccount;
let env: Record<string, string>;
let api: string;
let dataDir: string;
let controlUrl: string;

test.before(async () => {
  fake = await startFakeStripe();
  upstream = fake.createAccount();
  upstream.generate({ seed: 5, customers: 80 });
  fake.addKey(KEY, { account: upstream.id });
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-stripe-crash-'));
  controlUrl = await freshDatabase('ctl');
  const apiPort = await freePort();
  env = {
    TRIBUTARY_DATA_DIR: dataDir,
    DATABASE_URL: controlUrl,
    TRIBUTARY_TARGET_DATABASE_URL: serverAdminUrl(),
    TRIBUTARY_ADMIN_TOKEN: ADMIN,
    TRIBUTARY_API_PORT: String(apiPort),
    TRIBUTARY_ROLES: 'api,sync',
    TRIBUTARY_UPSTREAMS: `api.stripe.com=${fake.url}`,
  };
  api = `http://127.0.0.1:${apiPort}`;
});

test.after(async () => {
  await fake?.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function start(): Promise<Spawned> {
  const proc = spawnTributary(['run'], env);
  await waitFor('healthz', async () => {
    if (proc.child.exitCode !== null) throw new Error(`exited early: ${proc.output()}`);
    return (await request(api, 'GET', '/healthz')).status === 200 ? true : undefined;
  });
  return proc;
}

const objectsWritten = async (reader: string) => Number((await query<{ n: string }>(reader, 'SELECT count(*) AS n FROM public_swap._stripe_versions'))[0]!.n);

test('a backfill killed halfway resumes with no gap and no duplicate', async () => {
  let proc = await start();
  const account = await request(api, 'POST', '/api/accounts', { token: ADMIN, body: { name: 'crash' } });
  const token = account.body.api_token;
  const created = await request(api, 'POST', '/api/syncs', { token, body: { kind: 'stripe', api_key: KEY } });
  assert.is(created.status, 201, created.text);
  const reader = created.body.database.url;
  const admin = reader.replace(/\/\/[^@]+@/, `//${new URL(serverAdminUrl()).username}:${encodeURIComponent(new URL(serverAdminUrl()).password)}@`);

  // Kill it once part of the account is in, well before the end.
  await waitFor('part of the backfill', async () => ((await objectsWritten(admin).catch(() => 0)) >= 300 ? true : undefined), 60_000);
  proc.child.kill('SIGKILL');
  await proc.exited;
  const before = await objectsWritten(admin);
  const requestsBefore = fake.stats.requests;
  // The dead process's lease would lapse in 30 s; end it now rather than wait.
  await query(controlUrl, 'UPDATE syncs SET lease_until = now() WHERE id = $1', [created.body.id]);

  const backfilled = (id: string) =>
    waitFor('a backfill', async () => ((await request(api, 'GET', `/api/syncs/${id}`, { token })).body.status.completed_at ? true : undefined), 120_000);
  proc = await start();
  let crashed = 0;
  let clean = 0;
  try {
    await backfilled(created.body.id);
    crashed = fake.stats.requests;
    // The same account backfilled without a crash, for comparison (the first sync stopped first).
    await request(api, 'DELETE', `/api/syncs/${created.body.id}?keep_database=true`, { token });
    const started = fake.stats.requests;
    const again = await request(api, 'POST', '/api/syncs', { token, body: { kind: 'stripe', api_key: KEY } });
    await backfilled(again.body.id);
    clean = fake.stats.requests - started;
  } finally {
    proc.child.kill('SIGTERM');
    await proc.exited;
  }
  for (const [table, resource] of [
    ['customer', 'customers'],
    ['invoice', 'invoices'],
    ['charge', 'charges'],
    ['payment_intent', 'payment_intents'],
    ['subscription', 'subscriptions'],
    ['subscription_item', 'subscription_items'],
    ['payment_method', 'payment_methods'],
    ['balance_transaction', 'balance_transactions'],
  ] as const) {
    const rows = await query<{ n: string; distinct: string }>(admin, `SELECT count(*) AS n, count(DISTINCT id) AS distinct FROM public.${table}`);
    assert.is(Number(rows[0]!.n), upstream.count(resource), `${table}: every ${resource} object is there`);
    assert.is(rows[0]!.n, rows[0]!.distinct, `${table}: no duplicate`);
  }
  // Resumed, not restarted: both runs together asked about as much as one clean backfill.
  const after = await objectsWritten(admin);
  assert.ok(before > 0 && after > before, `${before} objects before the kill, ${after} after`);
  assert.ok(crashed <= clean * 1.1 + 20, `killed and resumed: ${crashed} requests (${requestsBefore} before the kill); clean: ${clean}`);
});

test.run();
