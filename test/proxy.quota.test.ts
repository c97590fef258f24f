/**
 * The proxy and the sync share the upstream quota (Airtable: 5 requests/s per base; Stripe:
 * 25/s per test-mode account): with the sync at its full rate and clients bursting far above
 * the quota, the fakes see no 429; clients go first; past the queue's bound clients get the
 * proxy's own 429. The fakes run in their own processes (see harness/fake-process.ts).
 */
import http from 'node:http';
import Airtable from 'airtable';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { airtableJs as ok, waitForCycle } from './harness/airtable.ts';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { waitFor } from './harness/process.ts';
import { query } from './harness/postgres.ts';
import { rawRequest, startProxy, type TestProxy } from './harness/proxy.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, loudSetUp, startTestService, type TestService } from './harness/service.ts';

const STRIPE_KEY = 'sk_test_QUOTAQUOTAQUOTA0000000000';

let svc: TestService;
let airtableFake: FakeProcess;
let stripeFake: FakeProcess;
let proxy: TestProxy;
let upstreams: Map<string, string>;

const auth = { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}`, 'content-type': 'application/json' };

test.before(
  loudSetUp(
    async () => {
      [airtableFake, stripeFake] = await Promise.all([
        startFakeProcess({ kind: 'airtable', token: AIRTABLE_TEST_TOKEN, records: 1500 }),
        startFakeProcess({ kind: 'stripe', key: STRIPE_KEY }),
      ]);
      upstreams = new Map([
        ['api.airtable.com', airtableFake.url],
        ['api.stripe.com', stripeFake.url],
      ]);
      svc = await startTestService({
        config: { roles: ['api', 'sync'], upstreams },
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 0 }, stripe: { pollIntervalMs: 250 }, workerTickMs: 250 },
      });
      const account = await createAccount(svc);
      const before = new Date();
      const airtableSync = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: airtableFake.id, api_key: AIRTABLE_TEST_TOKEN, settings: { turbo: true } },
      });
      assert.is(airtableSync.status, 201, airtableSync.text);
      const stripeSync = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'stripe', api_key: STRIPE_KEY, settings: { turbo: true } },
      });
      assert.is(stripeSync.status, 201, stripeSync.text);
      await waitForCycle(svc, account.token, airtableSync.body.id, before, 120_000);
      await waitFor(
        'the Stripe backfill',
        async () => ((await request(svc.api, 'GET', `/api/syncs/${stripeSync.body.id}`, { token: account.token })).body.status.completed_at ? true : undefined),
        120_000,
      );
      // A long enough wait that a slow machine still serves a whole burst (the bound has its own test).
      proxy = await startProxy(svc, { upstreams, queue: { maxWaitMs: 30_000 } });
    },
    () => svc,
  ),
);

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
  await airtableFake?.close();
  await stripeFake?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('Airtable: a sync at full rate plus a client burst far above the quota: no 429 upstream, clients first', async () => {
  // The sync sweeps continuously with all 5 requests/s (Turbo). On a machine loaded far past
  // its cores, the sync alone can draw a 429 (its 40 ms margin against scheduling delays of
  // the fake's process) and then sits out Airtable's 30 s lockout: wait for it to run again,
  // and count only the 429s from the burst on.
  let syncRate = 0;
  await waitFor(
    'the sync at its full rate',
    async () => {
      const before = (await airtableFake.stats()).requests;
      await sleep(2000);
      syncRate = ((await airtableFake.stats()).requests - before) / 2;
      return syncRate >= 3.5 ? true : undefined;
    },
    60_000,
  );
  const refusedBefore = (await airtableFake.stats()).rateLimited;
  if (refusedBefore > 0) process.stderr.write(`note: the sync alone drew ${refusedBefore} 429(s) before the burst (machine load)\n`);

  const started = new Date();
  const burst = 30;
  const client = new Airtable({ apiKey: AIRTABLE_TEST_TOKEN, endpointUrl: `${proxy.url}/api.airtable.com`, noRetryIfRateLimited: true }).base(airtableFake.id);
  const answers = await Promise.all([
    ...Array.from({ length: burst - 5 }, (_, i) =>
      rawRequest(
        proxy.url,
        'GET',
        `/api.airtable.com/v0/${airtableFake.id}/Big?pageSize=1&maxRecords=1&filterByFormula=${encodeURIComponent(`{Number}=${i + 1}`)}`,
        { headers: auth },
      ),
    ),
    ...Array.from({ length: 5 }, (_, i) => ok(client('Big').create({ Name: `Burst ${i}` })).then(() => ({ status: 200 }))),
  ]);
  const ended = new Date();
  const seconds = (ended.getTime() - started.getTime()) / 1000;
  assert.equal(
    answers.map((a) => a.status),
    Array(burst).fill(200),
  );
  assert.is((await airtableFake.stats()).rateLimited, refusedBefore, 'the fake answered no 429');

  // Who got the base's slots during the burst, from the shared limiter's own log.
  const shares = await query<{ kind: string; n: string }>(
    svc.controlUrl,
    'SELECT kind, count(*) AS n FROM quota_requests WHERE key = $1 AND at BETWEEN $2 AND $3 GROUP BY kind',
    [airtableFake.id, started, ended],
  );
  const count = (kind: string) => Number(shares.find((s) => s.kind === kind)?.n ?? 0);
  const clientSlots = count('client');
  const syncSlots = count('sync') + count('urgent');
  assert.ok(clientSlots >= burst, `clients had ${clientSlots} slots`);
  // Clients first: the sync keeps only the one slot a second its sweep is promised.
  assert.ok(syncSlots <= Math.ceil(seconds) + 1, `the sync took ${syncSlots} slots in ${seconds.toFixed(1)} s, clients ${clientSlots}`);
  // A sliding one-second window: over T seconds at most 5 per started second, plus the 5 a quiet window may grant at once.
  assert.ok(clientSlots + syncSlots <= 5 * (Math.ceil(seconds) + 1), `never above the base quota: ${clientSlots + syncSlots} slots in ${seconds.toFixed(1)} s`);

  const after = (await airtableFake.stats()).requests;
  await sleep(1500);
  assert.ok((await airtableFake.stats()).requests > after, 'the sync goes on after the burst');
  assert.is((await airtableFake.stats()).rateLimited, refusedBefore);
});

test('Airtable: past the queue bound, the proxy answers 429 itself, with Retry-After; upstream still sees none', async () => {
  const refusedBefore = (await airtableFake.stats()).rateLimited;
  const bounded = await startProxy(svc, { upstreams, queue: { maxWaiting: 4, maxWaitMs: 2000 } });
  try {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        rawRequest(bounded.url, 'GET', `/api.airtable.com/v0/${airtableFake.id}/Big?pageSize=1&maxRecords=1`, { headers: auth }),
      ),
    );
    const served = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    assert.is(served.length + refused.length, 20, answers.map((a) => a.status).join(','));
    assert.ok(served.length >= 4 && refused.length >= 10, `${served.length} served, ${refused.length} refused`);
    for (const r of refused) {
      assert.is(r.json.error.source, 'proxy');
      assert.is(r.json.error.code, 'too_many_requests');
      assert.match(r.json.error.message, /shared with the sync/);
      assert.ok(Number(r.headers['retry-after']) >= 1);
    }
    assert.is((await airtableFake.stats()).rateLimited, refusedBefore);
  } finally {
    await bounded.stop();
  }
});

test('Airtable: clients that hang up while queued leave quietly: no error in the log, the rest served', async () => {
  const patient = await startProxy(svc, { upstreams, queue: { maxWaitMs: 10_000 } });
  const from = svc.logs.lines.length;
  try {
    const path = `/api.airtable.com/v0/${airtableFake.id}/Big?pageSize=1&maxRecords=1`;
    // 30 requests against 5 a second: most wait in the queue; half of them give up after 300 ms.
    const leaving = Array.from({ length: 15 }, () =>
      fetch(`${patient.url}${path}`, { headers: auth, signal: AbortSignal.timeout(300) }).then(
        () => 'answered',
        () => 'left',
      ),
    );
    const staying = Array.from({ length: 15 }, () => rawRequest(patient.url, 'GET', path, { headers: auth }));
    const left = (await Promise.all(leaving)).filter((r) => r === 'left').length;
    const served = (await Promise.all(staying)).filter((a) => a.status === 200).length;
    assert.ok(left >= 5, `${left} clients left while queued`);
    assert.is(served, 15, 'those that stayed were served');
    await sleep(500);
    const lines = svc.logs.lines.slice(from).map((line) => JSON.parse(line) as { level: number; msg: string });
    assert.equal(
      lines.filter((l) => l.level >= 50).map((l) => l.msg),
      [],
      'no error logged',
    );
    assert.ok(
      lines.some((l) => l.msg === 'proxy client went away while its request waited'),
      'each is noted at debug',
    );
  } finally {
    await patient.stop();
  }
});

test('Stripe: a request whose body arrives slowly is logged in the quota when it went upstream, not when it was granted', async () => {
  // The slot is granted as the headers arrive; the upstream counts the request once it has all
  // of it. Logged at the grant, the next window would open early by the body's time.
  const started = Date.now();
  let lastByteAt = 0;
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request(`${proxy.url}/v1/customers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${STRIPE_KEY}`, 'content-type': 'application/x-www-form-urlencoded', 'transfer-encoding': 'chunked' },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.write('email=slow%40example.com');
    setTimeout(() => {
      lastByteAt = Date.now();
      req.end('&name=Slow');
    }, 600);
  });
  assert.is(status, 200);
  const clientEntries = async () =>
    (await query<{ at: Date }>(svc.controlUrl, "SELECT at FROM quota_requests WHERE kind = 'client' AND at >= $1 ORDER BY at", [new Date(started)])).map((r) =>
      r.at.getTime(),
    );
  // The restamp is written without waiting for it: look until it lands.
  const entries = await waitFor(
    'the request logged after its last byte',
    async () => {
      const at = await clientEntries();
      return at.length > 0 && at[0]! >= lastByteAt - 20 ? at : undefined;
    },
    10_000,
  ).catch(async () => clientEntries());
  assert.ok(entries.length > 0, 'the request took a slot');
  assert.ok(entries[0]! >= lastByteAt - 20, `logged ${lastByteAt - entries[0]!} ms before its last byte went`);
});

test('Stripe: a burst above the account limit (25/s in test mode) alongside the sync: no 429 upstream', async () => {
  const stripe = new Stripe(STRIPE_KEY, { host: '127.0.0.1', port: proxy.port, protocol: 'http', maxNetworkRetries: 0 });
  const refusedBefore = (await stripeFake.stats()).rateLimited;
  const started = Date.now();
  const answers = await Promise.allSettled([
    ...Array.from({ length: 70 }, () => stripe.customers.list({ limit: 1 })),
    ...Array.from({ length: 10 }, (_, i) => stripe.customers.create({ email: `burst${i}@example.com` })),
  ]);
  const seconds = (Date.now() - started) / 1000;
  assert.equal(
    answers.filter((a) => a.status === 'rejected').map((a) => String((a as PromiseRejectedResult).reason)),
    [],
  );
  assert.ok(seconds >= 2.5, `80 requests (and the write-through fetches) at 25/s take over 3 s, took ${seconds.toFixed(1)} s`);
  assert.is((await stripeFake.stats()).rateLimited, refusedBefore, 'no 429 from the fake');
});

test.run();
