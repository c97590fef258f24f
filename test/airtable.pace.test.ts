/**
 * Paced sweeps: while change capture is healthy and the latest cycle found nothing it had
 * missed, a cycle's requests are spread over the paced duration instead of the full pace of
 * the quota. The cycle is still always under way, changes still arrive by change capture in
 * seconds, the indicator does not call a paced cycle slow, and the full pace is back as soon
 * as a sweep finds something capture missed or capture stops working.
 */
import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { indicatorOf, indicatorReason } from '../src/control/status.ts';
import { CyclePace } from '../src/airtable/pace.ts';
import { CONFIRM_EVERY_MS } from '../src/sync/status-reporter.ts';
import { withDatabase } from '../src/db/sql.ts';
import { waitForCycle, waitForRows } from './harness/airtable.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const PACED_MS = 9000;
let svc: TestService;
let account: TestAccount;
let syncId: string;
let reader: string;
let admin: string;
let base: ReturnType<TestService['airtable']['createBase']>;
/** When each request listing a page of the base's table reached the fake. */
const pageRequests: number[] = [];

diagnostics.subscribe('http.server.request.start', (message) => {
  const { request: req } = message as { request: IncomingMessage };
  const path = (req.url ?? '').split('?')[0]!;
  if (req.method === 'POST' && base && path.startsWith(`/v0/${base.id}/`) && path.endsWith('/listRecords')) pageRequests.push(Date.now());
});
const pagesWithin = (from: number, to: number) => pageRequests.filter((t) => t >= from && t < to).length;

async function status() {
  return (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body.status;
}

test.before(async () => {
  svc = await startTestService({
    config: { roles: ['api', 'sync'] },
    // Capture polls once a second (the default), taking one of the sync's 3 requests a second.
    tunables: { airtable: { pollIntervalMs: 1000, pacedCycleMs: PACED_MS }, workerTickMs: 250 },
  });
  account = await createAccount(svc);
  base = svc.airtable.createBase({ name: 'Paced' });
  base.createTable('Items', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Count', type: 'number', options: { precision: 0 } },
  ]);
  // Five pages: at the full pace (3 requests a second) a cycle takes about 2 s.
  base.createRecords(
    'Items',
    Array.from({ length: 450 }, (_, n) => ({ Name: `item ${n}`, Count: n })),
  );
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  syncId = created.body.id;
  reader = created.body.database.url;
  admin = withDatabase(serverAdminUrl(), created.body.database.name);
  await waitForCycle(svc, account.token, syncId, new Date(Date.now() - 1000));
});
test.after(async () => svc.stop());

test('with change capture proven, cycles are spread out, still under way, and not called slow', async () => {
  await waitFor('a paced cycle', async () => ((await status()).paced_cycle_s === PACED_MS / 1000 ? true : undefined), 30_000);
  const from = Date.now();
  const indicators = new Set<string>();
  let running = 0;
  let samples = 0;
  const lags: number[] = [];
  while (Date.now() - from < 2 * PACED_MS) {
    const s = await status();
    indicators.add(s.indicator);
    lags.push(s.lag_seconds);
    samples++;
    if (Date.parse(s.started_at) > Date.parse(s.completed_at ?? 0)) running++;
    await new Promise((r) => setTimeout(r, 500));
  }
  const pages = pagesWithin(from, Date.now());
  // Full pace would list the table's five pages about every 3 s: some 30 requests here.
  assert.ok(pages >= 5 && pages <= 16, `${pages} page requests in ${2 * PACED_MS} ms`);
  assert.ok(running / samples > 0.8, `a cycle was under way in ${running} of ${samples} samples`);
  assert.equal([...indicators], ['normal'], 'a paced cycle is not slower than usual');
  // Lag counts from change capture's reads (recorded every 5 s), not from the paced cycle's start.
  assert.ok(Math.max(...lags) <= CONFIRM_EVERY_MS / 1000 + 3, `lag_seconds while paced: ${lags.join(', ')}`);
  // The console's chart says the same: its samples of those cycles are not the time between their starts.
  const history = (await request(svc.api, 'GET', `/api/syncs/${syncId}/history?hours=1`, { token: account.token })).body;
  const charted = history.cycles.filter((c: { at: string }) => Date.parse(c.at) >= from).map((c: { lag_seconds: number }) => c.lag_seconds);
  assert.ok(charted.length > 0, 'the chart has samples of the paced cycles');
  assert.ok(Math.max(...charted) <= CONFIRM_EVERY_MS / 1000 + 3, `the chart's lag while paced: ${charted.join(', ')}`);
  const [meta] = await query<{ s: number }>(reader, 'SELECT extract(epoch FROM duration_last)::float8 AS s FROM _sync_meta');
  assert.ok(meta!.s > (PACED_MS / 1000) * 0.5, `_sync_meta says a cycle took ${meta!.s} s`);
});

test('while paced, an edit still arrives by change capture in seconds', async () => {
  const record = base.records('Items')[7]!;
  base.updateRecord('Items', record.id, { Name: 'edited while paced' });
  const arrived = await waitForRows(reader, `SELECT 1 FROM items WHERE id = '${record.id}' AND name = 'edited while paced'`, (r) => r.length === 1);
  assert.ok(arrived.ms < 4000, `arrived in ${arrived.ms} ms`);
});

test('a sweep that finds what change capture missed brings back the full pace, then paces again', async () => {
  const record = base.records('Items')[3]!;
  // A difference no payload will ever tell of: only a sweep can find it.
  await query(admin, `UPDATE public.items SET name = 'tampered' WHERE id = '${record.id}'`);
  await waitForRows(reader, `SELECT 1 FROM items WHERE id = '${record.id}' AND name = '${record.fields.Name}'`, (r) => r.length === 1, 3 * PACED_MS);
  const found = Date.now();
  await waitFor('the full pace', async () => ((await status()).paced_cycle_s === null ? true : undefined), 3 * PACED_MS);
  await waitFor('paced again', async () => ((await status()).paced_cycle_s === PACED_MS / 1000 ? true : undefined), 3 * PACED_MS);
  // A full-pace cycle in between: its five pages within about 2.5 s (paced, 1.5 s apart).
  const busiest = Math.max(...pageRequests.filter((t) => t >= found).map((t) => pagesWithin(t, t + 3000)));
  assert.ok(busiest >= 4, `at most ${busiest} page requests in 3 s`);
});

test('when change capture stops working, the sweep goes back to the full pace at once', async () => {
  await waitFor('paced', async () => ((await status()).paced_cycle_s === PACED_MS / 1000 ? true : undefined), 3 * PACED_MS);
  svc.airtable.faults.add({ match: { path: new RegExp(`^/v0/bases/${base.id}/webhooks/[^/]+/payloads$`) }, kind: 'status', status: 503, times: Infinity });
  try {
    // Capture is unhealthy 10 s after its last good poll; the running cycle's next request goes at once.
    await new Promise((r) => setTimeout(r, 11_000));
    const from = Date.now();
    await new Promise((r) => setTimeout(r, 3000));
    const pages = pagesWithin(from, Date.now());
    assert.ok(pages >= 4, `${pages} page requests in 3 s`);
    await waitFor('the status says so', async () => ((await status()).paced_cycle_s === null ? true : undefined), 3 * PACED_MS);
    // Edits still arrive, by the sweep alone.
    const record = base.records('Items')[9]!;
    base.updateRecord('Items', record.id, { Name: 'edited without capture' });
    await waitForRows(reader, `SELECT 1 FROM items WHERE id = '${record.id}' AND name = 'edited without capture'`, (r) => r.length === 1, 10_000);
  } finally {
    svc.airtable.faults.clear();
  }
});

test('the indicator measures a paced cycle against its own target', () => {
  const now = new Date('2026-11-26T12:00:40Z');
  const running = {
    startedAt: new Date('2026-11-26T12:00:00Z'),
    completedAt: new Date('2026-11-26T11:59:59Z'),
    durationLastSeconds: 2,
    durationUsualSeconds: 2,
    lastError: null,
    lastErrorAt: null,
    lastErrorKind: null,
    progress: null,
  };
  assert.is(indicatorOf({ ...running, pacedCycleSeconds: 60 }, now), 'normal', '40 s into a cycle paced over 60 s');
  assert.is(indicatorOf({ ...running, pacedCycleSeconds: null }, now), 'yellow', '40 s into a cycle that usually takes 2 s');
  assert.is(indicatorOf({ ...running, pacedCycleSeconds: 60 }, new Date('2026-11-26T12:01:40Z')), 'yellow', 'past 1.5 times its target');
});

test("a new sync's status says its first sync is under way, not that it syncs as usual", () => {
  const now = new Date('2026-11-26T12:00:40Z');
  const first = {
    startedAt: new Date('2026-11-26T12:00:30Z'),
    completedAt: null,
    durationLastSeconds: null,
    durationUsualSeconds: null,
    lastError: null,
    lastErrorAt: null,
    lastErrorKind: null,
    progress: null,
    pacedCycleSeconds: null,
  };
  assert.is(indicatorOf(first, now), 'normal');
  assert.is(indicatorReason(first, now), 'first sync under way: the database is not complete yet');
  assert.is(indicatorReason({ ...first, completedAt: new Date('2026-11-26T12:00:35Z'), durationLastSeconds: 5 }, now), 'syncing as usual');
});

/** A CyclePace of a 60 s paced cycle, its first cycle (of four requests) done: the next one is paced. */
async function provenPace(urgent: () => boolean): Promise<CyclePace> {
  const pace = new CyclePace({ cycleMs: 60_000, healthy: () => true, urgent, report: async () => undefined, signal: new AbortController().signal });
  await pace.begin();
  for (let n = 0; n < 4; n++) await pace.turn();
  pace.end();
  return pace;
}

/** How long the next `count` turns take, in ms. */
async function turnsTake(pace: CyclePace, count: number): Promise<number> {
  const from = Date.now();
  for (let n = 0; n < count; n++) await pace.turn();
  return Date.now() - from;
}

test('a paced cycle that finds what capture missed (a rebuild for new settings) finishes at the full pace', async () => {
  const pace = await provenPace(() => false);
  await pace.begin();
  await pace.turn(); // paced: its 15 s gap starts now
  pace.missed();
  // Paced, the next three would wait 45 s; airtable.sync's settings change once took 46 s so.
  assert.ok((await turnsTake(pace, 3)) < 1000, 'the rest of the cycle is not paced');
});

test('new settings during a paced cycle: that cycle and the next, which applies them, go at the full pace', async () => {
  let changed = false;
  const pace = await provenPace(() => changed);
  await pace.begin();
  await pace.turn();
  changed = true; // a PATCH of the settings, seen at the next turn
  assert.ok((await turnsTake(pace, 3)) < 6000, 'urgent: the cycle hurries (within one 5 s check)');
  pace.end();
  changed = false; // the next cycle loads the new settings
  await pace.begin();
  assert.ok((await turnsTake(pace, 4)) < 1000, 'the cycle that applies them is not paced');
});

test.run();
