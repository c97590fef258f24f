/**
 * /metrics: the registry writes valid Prometheus text (checked by parsing it back), and the
 * service's per-sync values match the control database and the sync's view; upstream 429s
 * are counted where the sync's clients see them.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AirtableClient } from '../src/airtable/client.ts';
import { Secret } from '../src/control/secrets.ts';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { startFakeStripe, type FakeStripe } from '../fakes/stripe/index.ts';
import { MetricsRegistry, PROMETHEUS_CONTENT_TYPE, ServiceMetrics } from '../src/metrics/index.ts';
import { waitFor } from './harness/process.ts';
import { query } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface ParsedFamily {
  type: string;
  help: string;
  samples: ParsedSample[];
}

/** A strict reader of the text format: every line must be HELP, TYPE or a sample of the family just declared. */
function parse(text: string): Map<string, ParsedFamily> {
  assert.ok(text === '' || text.endsWith('\n'), 'ends with a newline');
  const families = new Map<string, ParsedFamily>();
  let current: string | undefined;
  const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? (\S+)$/;
  for (const line of text.split('\n').filter(Boolean)) {
    const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (help) {
      assert.not.ok(families.has(help[1]!), `${help[1]} declared once`);
      families.set(help[1]!, { type: '', help: help[2]!, samples: [] });
      current = help[1];
    } else if (type) {
      assert.is(type[1], current, 'TYPE follows its HELP');
      families.get(current!)!.type = type[2]!;
    } else {
      const m = sample.exec(line);
      assert.ok(m, `a sample line: ${line}`);
      const name = m![1]!;
      const family = families.get(current!)!;
      const suffixes = family.type === 'histogram' ? ['_bucket', '_sum', '_count'] : [''];
      assert.ok(
        suffixes.some((s) => name === current + s),
        `${name} belongs to ${current}`,
      );
      const labels: Record<string, string> = {};
      for (const pair of (m![2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[pair[1]!] = pair[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      }
      const raw = m![3]!;
      const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
      assert.ok(raw === 'NaN' || !Number.isNaN(value), `a number: ${raw}`);
      family.samples.push({ name, labels, value });
    }
  }
  return families;
}

function one(families: Map<string, ParsedFamily>, name: string, labels: Record<string, string>): number | undefined {
  const family = families.get(name.replace(/_(bucket|sum|count)$/, '')) ?? families.get(name);
  const found = family?.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(!found || found.length <= 1, `one ${name} for ${JSON.stringify(labels)}`);
  return found?.[0]?.value;
}

test('the registry writes counters, gauges and histograms in the text format', async () => {
  const registry = new MetricsRegistry();
  const counter = registry.counter('demo_requests_total', 'Requests.\nSecond line with a \\ backslash.', ['path']);
  const gauge = registry.gauge('demo_temperature', 'A gauge.');
  const histogram = registry.histogram('demo_seconds', 'A histogram.', ['kind'], [0.1, 1]);
  counter.inc({ path: '/a "quoted"\npath\\' });
  counter.inc({ path: '/a "quoted"\npath\\' }, 2);
  gauge.set({}, -1.5);
  for (const v of [0.05, 0.1, 0.5, 3]) histogram.observe({ kind: 'x' }, v);
  registry.collect(async () => [
    { name: 'demo_collected', help: 'From a collector.', type: 'gauge', samples: [{ name: 'demo_collected', labels: { a: 'b' }, value: Infinity }] },
  ]);
  const text = await registry.render();
  const families = parse(text);
  assert.equal([...families.keys()].sort(), ['demo_collected', 'demo_requests_total', 'demo_seconds', 'demo_temperature']);
  assert.is(families.get('demo_requests_total')!.help, 'Requests.\\nSecond line with a \\\\ backslash.');
  assert.is(one(families, 'demo_requests_total', { path: '/a "quoted"\npath\\' }), 3);
  assert.is(one(families, 'demo_temperature', {}), -1.5);
  assert.is(one(families, 'demo_collected', { a: 'b' }), Infinity);
  assert.equal(
    ['0.1', '1', '+Inf'].map((le) => one(families, 'demo_seconds_bucket', { kind: 'x', le })),
    [2, 3, 4],
    'buckets are cumulative; +Inf is the count',
  );
  assert.is(one(families, 'demo_seconds_count', { kind: 'x' }), 4);
  assert.is(one(families, 'demo_seconds_sum', { kind: 'x' }), 3.65);
  assert.throws(() => counter.inc({ path: 'x' }, -1));
  assert.throws(() => counter.inc({ wrong: 'x' }));
  assert.throws(() => registry.gauge('demo_temperature', 'again'));
  assert.throws(() => registry.gauge('bad-name', 'x'));
});

test('proxy metrics: requests by upstream and status, latency by upstream; unknown hosts are "other"', async () => {
  const metrics = new ServiceMetrics({ pool: { query: async () => ({ rows: [] }) } as never });
  metrics.proxyRequest('api.airtable.com', 200, 0.02);
  metrics.proxyRequest('api.airtable.com', 200, 0.3);
  metrics.proxyRequest('api.airtable.com', 422, 0.04);
  metrics.proxyRequest('api.stripe.com', 504, 30.5);
  metrics.proxyRequest('evil.example.com', 403, 0.001);
  const families = parse(await metrics.render());
  assert.is(families.get('tributary_proxy_requests_total')!.type, 'counter');
  assert.is(families.get('tributary_proxy_request_duration_seconds')!.type, 'histogram');
  assert.is(one(families, 'tributary_proxy_requests_total', { upstream: 'api.airtable.com', status: '200' }), 2);
  assert.is(one(families, 'tributary_proxy_requests_total', { upstream: 'api.airtable.com', status: '422' }), 1);
  assert.is(one(families, 'tributary_proxy_requests_total', { upstream: 'other', status: '403' }), 1);
  assert.is(one(families, 'tributary_proxy_request_duration_seconds_count', { upstream: 'api.airtable.com' }), 3);
  assert.is(one(families, 'tributary_proxy_request_duration_seconds_bucket', { upstream: 'api.airtable.com', le: '0.05' }), 2);
  assert.is(one(families, 'tributary_proxy_request_duration_seconds_bucket', { upstream: 'api.stripe.com', le: '30' }), 0);
  assert.is(one(families, 'tributary_proxy_request_duration_seconds_bucket', { upstream: 'api.stripe.com', le: '+Inf' }), 1);
});

test('the Airtable client tells its hook of each 429', async () => {
  const fake = await startFakeAirtable({ port: 0 });
  try {
    fake.addToken(AIRTABLE_TEST_TOKEN, { bases: '*' });
    const base = fake.createBase({ name: 'Refusals' });
    fake.faults.add({ match: { baseId: base.id }, kind: 'status', status: 429, times: 2 });
    let refused = 0;
    const client = new AirtableClient({
      baseUrl: fake.url,
      token: new Secret(AIRTABLE_TEST_TOKEN),
      baseId: base.id,
      lockoutMs: 10,
      onRateLimited: () => refused++,
    });
    assert.equal(await client.schema(), []);
    assert.is(refused, 2);
  } finally {
    await fake.close();
  }
});

let svc: TestService | undefined;
let stripeFake: FakeStripe | undefined;

test('GET /metrics: per-sync values from the control database, for the operator only', async () => {
  const STRIPE_KEY = 'sk_test_metricsKey0000000000001';
  stripeFake = await startFakeStripe();
  const upstream = stripeFake.createAccount();
  stripeFake.addKey(STRIPE_KEY, { account: upstream.id });
  svc = await startTestService({
    config: { roles: ['api', 'sync', 'decoder'] },
    tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, stripe: { pollIntervalMs: 300 }, workerTickMs: 250, decoder: { lagReportMs: 300 } },
    stripeUrl: stripeFake.url,
  });
  const account: TestAccount = await createAccount(svc);
  const base = svc.airtable.createBase({ name: 'Metrics' });
  base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
  base.createRecords('Items', [{ Name: 'a' }, { Name: 'b' }, { Name: 'c' }]);
  const airtable = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(airtable.status, 201, airtable.text);
  const stripe = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: STRIPE_KEY } });
  assert.is(stripe.status, 201, stripe.text);
  const airtableId = airtable.body.id as string;
  const stripeId = stripe.body.id as string;

  // Two 429s on the Stripe sync's events feed, once it follows the feed.
  await waitFor('the Stripe backfill', async () =>
    (await request(svc!.api, 'GET', `/api/syncs/${stripeId}`, { token: account.token })).body.status.completed_at ? true : undefined,
  );
  stripeFake.faults.add({ match: { path: '/v1/events' }, kind: 'status', status: 429, times: 2 });
  await waitFor('the Airtable events and the slot lag', async () => {
    const rows = await query<{ seq: string; slot_lag_bytes: string | null }>(
      svc!.controlUrl,
      'SELECT seq, slot_lag_bytes FROM decoder_progress WHERE sync_id = $1',
      [airtableId],
    );
    return Number(rows[0]?.seq) >= 3 && rows[0]?.slot_lag_bytes !== null ? true : undefined;
  });
  await waitFor('the 429s counted', async () => {
    const rows = await query<{ n: string }>(svc!.controlUrl, 'SELECT upstream_429s AS n FROM syncs WHERE id = $1', [stripeId]);
    return rows[0]?.n === '2' ? true : undefined;
  });
  // A sync held back by 429s says so, in its status and once in the log, instead of "syncing as usual".
  const refused = (await request(svc.api, 'GET', `/api/syncs/${stripeId}`, { token: account.token })).body.status;
  assert.match(refused.slowed_by, /^Stripe answered 429: the account's requests/);
  assert.is(refused.reason, 'syncing, slowed by an upstream limit');
  const warnings = svc.logs.lines.filter((l) => l.includes('the upstream answered 429') && l.includes(stripeId));
  assert.is(warnings.length, 1, warnings.join('\n'));

  const scrape = await fetch(`${svc.api}/metrics`, { headers: { authorization: `Bearer ${svc.adminToken}` } });
  assert.is(scrape.status, 200);
  assert.is(scrape.headers.get('content-type'), PROMETHEUS_CONTENT_TYPE);
  const text = await scrape.text();
  const families = parse(text);
  const view = (await request(svc.api, 'GET', `/api/syncs/${airtableId}`, { token: account.token })).body;
  const progress = await query<{ seq: string; slot_lag_bytes: string }>(svc.controlUrl, 'SELECT seq, slot_lag_bytes FROM decoder_progress WHERE sync_id = $1', [
    airtableId,
  ]);
  const a = { sync_id: airtableId, kind: 'airtable' };
  const s = { sync_id: stripeId, kind: 'stripe' };

  assert.is(families.get('tributary_sync_lag_seconds')!.type, 'gauge');
  const lag = one(families, 'tributary_sync_lag_seconds', a)!;
  assert.ok(lag >= 0 && Math.abs(lag - view.status.lag_seconds) < 2, `lag ${lag} against the view's ${view.status.lag_seconds}`);
  assert.ok(one(families, 'tributary_sync_lag_seconds', s)! >= 0);
  assert.ok(one(families, 'tributary_sync_cycle_duration_seconds', a)! >= 0);
  assert.is(families.get('tributary_sync_events_logged_total')!.type, 'counter');
  // The decoder may log more between the two reads; never fewer.
  assert.ok(
    one(families, 'tributary_sync_events_logged_total', a)! <= Number(progress[0]!.seq) && one(families, 'tributary_sync_events_logged_total', a)! >= 3,
  );
  assert.ok(one(families, 'tributary_sync_slot_lag_bytes', a)! >= 0);
  // The event log's lag, by the status's rule: the decoder has reported, and is caught up or nearly.
  assert.is(families.get('tributary_sync_events_lag_seconds')!.type, 'gauge');
  const eventsLag = one(families, 'tributary_sync_events_lag_seconds', a)!;
  assert.ok(eventsLag >= 0 && eventsLag < 60, `events lag ${eventsLag} s`);
  assert.is(one(families, 'tributary_sync_upstream_429_total', s), 2);
  assert.is(one(families, 'tributary_sync_upstream_429_total', a), 0);
  assert.ok(families.has('tributary_proxy_requests_total'));

  // Nothing about a sync but its id and kind: no keys, tokens, database names or URLs.
  for (const secret of [STRIPE_KEY, AIRTABLE_TEST_TOKEN, account.token, svc.adminToken, airtable.body.database.name, airtable.body.database.url]) {
    assert.not.ok(text.includes(secret), 'no secret or database name in the metrics');
  }
  const labelNames = new Set([...families.values()].flatMap((f) => f.samples.flatMap((x) => Object.keys(x.labels))));
  // Pool servers by their id only (srv_…): never a host or URL.
  // Tables by name only where the upstream names them (Stripe's object types; src/metrics/drift.ts).
  for (const name of labelNames) assert.ok(['kind', 'le', 'status', 'sync_id', 'upstream', 'server_id', 'table', 'drift'].includes(name), `label ${name}`);
  const tables = [...families.values()].flatMap((f) =>
    f.samples.flatMap((x) => (x.labels.table !== undefined && x.labels.sync_id === a.sync_id ? [x.labels.table] : [])),
  );
  assert.ok(
    tables.every((t) => t === ''),
    `an Airtable sync's tables are no label: ${tables.join(', ')}`,
  );
  assert.ok(tables.length > 0, "the Airtable sync's sweeps are in the drift metrics");
  const keep = families.get('tributary_server_slot_wal_keep_bytes')!.samples;
  assert.equal(
    keep.map((x) => x.value),
    [1024 * 1024 * 1024],
    "the configured server's bound on the WAL its slots keep",
  );

  assert.is((await request(svc.api, 'GET', '/metrics')).status, 401);
  assert.is((await request(svc.api, 'GET', '/metrics', { token: account.token })).status, 403);
});

test.after(async () => {
  await svc?.stop();
  await stripeFake?.close();
});

test.run();
