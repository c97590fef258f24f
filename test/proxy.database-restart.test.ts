/**
 * Read-after-write across a restart of the sync databases' server, as the traffic
 * simulation found it: a proxied Stripe delete made while the server was down was answered
 * at once, its write-through lost, and the client's read right after showed the row still
 * there. The write-through now waits for the database to come back (within its patience);
 * past the patience the answer goes back marked `Tributary-Write-Through: failed`, and the
 * sync brings the row in step once the database is back.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { pause } from '../src/time.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { query } from './harness/postgres.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';
import { waitOk } from './harness/service.ts';
import { waitFor } from './harness/process.ts';
import { BackfillStore } from '../src/backfill/store.ts';
import pg from 'pg';

const KEY = 'sk_test_RESTARTRESTART00000000';
const PATIENCE_MS = 8000;
let dir: string;
let server: CrashablePostgres;
let set: StripeSyncSetUp;
let proxied: Stripe;

test.before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-restart-'));
  server = await CrashablePostgres.start('sync databases', dir);
  set = await backfilledStripeSync({
    key: KEY,
    seed: 31,
    customers: 6,
    // The sync's own poll must not be what brings the row in step.
    pollIntervalMs: 60_000,
    config: { roles: ['api', 'proxy', 'sync', 'decoder'], targetDatabaseUrl: server.adminUrl },
    tunables: { proxy: { writeThroughPatienceMs: PATIENCE_MS } },
  });
  proxied = new Stripe(KEY, {
    host: '127.0.0.1',
    port: set.svc.service.proxyPort!,
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 0,
  });
});

test.after(async () => {
  await set?.svc.stop();
  await set?.fake.close();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const nameOf = async (id: string) => (await query<{ name: string | null }>(set.reader, 'SELECT name FROM customer WHERE id = $1', [id]))[0]?.name;

test('read-after-write: a proxied update and delete made while the sync database restarts are in the database when answered', async () => {
  const [kept, gone] = (await set.stripe.customers.list({ limit: 2 })).data;
  assert.ok(kept && gone, 'two customers');
  await server.crash();
  let answeredAt = 0;
  const writes = Promise.all([proxied.customers.update(kept.id, { name: 'Renamed during the restart' }), proxied.customers.del(gone.id)]).then((answers) => {
    answeredAt = Date.now();
    return answers;
  });
  await pause(1500);
  const restartedAt = Date.now();
  await server.start();
  const [updated, deleted] = await writes;
  assert.is(updated.name, 'Renamed during the restart');
  assert.is(deleted.deleted, true);
  assert.ok(answeredAt >= restartedAt, `answered ${restartedAt - answeredAt} ms before the database was back: the write-through was given up`);
  assert.is(updated.lastResponse.headers['tributary-write-through'], undefined, 'written through');
  // The read right after the answers shows both writes.
  assert.is(await nameOf(kept.id), 'Renamed during the restart');
  assert.is(await nameOf(gone.id), undefined, 'the deleted customer is gone');
  assert.ok(set.svc.logs.text.includes('write-through waits for the database to come back'), 'the wait is logged');
});

test('past its patience the answer goes back marked, unchanged, and the sync catches up once the database is back', async () => {
  const [customer] = (await set.stripe.customers.list({ limit: 1 })).data;
  assert.ok(customer);
  await server.crash();
  const started = Date.now();
  const updated = await proxied.customers.update(customer.id, { name: 'Renamed during a long outage' });
  const took = Date.now() - started;
  assert.is(updated.name, 'Renamed during a long outage', "the upstream's answer, unchanged");
  assert.is(updated.lastResponse.headers['tributary-write-through'], 'failed');
  assert.ok(took >= PATIENCE_MS - 500 && took < PATIENCE_MS + 5000, `answered after ${took} ms`);
  await server.start();
  await waitOk(set.svc, set.account.token, set.syncId, 60_000);
  assert.is(await nameOf(customer.id), 'Renamed during a long outage', 'nothing lost: the sync brought the row in step');
});

test('a backfill that finds the sync database down waits for it, and ends done once it is back', async () => {
  // Seen in the simulation: a backfill asked for as the sync server crashed ended 'failed'
  // (connect ECONNREFUSED) and never read a row.
  await server.crash();
  try {
    const store = new BackfillStore(new pg.Pool({ connectionString: set.svc.controlUrl, max: 1 }));
    const made = await store.create({ syncId: set.syncId, accountId: set.account.id, collections: ['customer'], destinationId: null });
    const state = async () => (await query<{ state: string }>(set.svc.controlUrl, 'SELECT state FROM backfills WHERE id = $1', [made.id]))[0]!.state;
    // The runner meets the database away: the backfill is tried again, not ended.
    await waitFor('the runner to meet the database away', async () =>
      (await state()) !== 'running' || set.svc.logs.text.includes('backfill runner failed; trying again') ? true : undefined,
    );
    assert.is(await state(), 'running');
  } finally {
    await server.start();
  }
  const done = await waitFor(
    'the backfill done',
    async () => {
      const [row] = await query<{ state: string; rows: number }>(
        set.svc.controlUrl,
        'SELECT state, rows::int AS rows FROM backfills WHERE sync_id = $1 ORDER BY created_at DESC LIMIT 1',
        [set.syncId],
      );
      return row!.state === 'done' ? row : undefined;
    },
    60_000,
  );
  const [customers] = await query<{ n: number }>(set.reader, 'SELECT count(*)::int AS n FROM customer');
  assert.is(done!.rows, customers!.n, 'every customer read');
});

test.run();
