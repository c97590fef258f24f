/**
 * The wait endpoint through the whole service: an answer `ok` means a pass that began after
 * the request has completed and the decoder has logged everything before it, so the row and
 * its event are there the moment it answers (no polling in these assertions). Poll intervals
 * are set long, so quick answers also show that a wait starts the next pass at once.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { startFakeStripe, type FakeStripe } from '../fakes/stripe/index.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { query } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, loudSetUp, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const STRIPE_KEY = 'sk_test_waitEndpointKey00000001';
/** Longer than any wait below is allowed to take: only a woken pass answers in time. */
const SLOW_POLL_MS = 30_000;

let svc: TestService;
let fake: FakeStripe;
let account: TestAccount;
let other: TestAccount;
let base: FakeBase;
let airtableSync: string;
let airtableReader: string;

const wait = (syncId: string, token = account.token, query = '') => request(svc.api, 'GET', `/api/wait/${syncId}${query}`, { token });

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work();
  return { value, ms: Date.now() - started };
}

async function eventsOf(syncId: string): Promise<Array<{ event: string; id: string; data: Record<string, unknown> }>> {
  const rows = await query<{ value: string }>(svc.controlUrl, 'SELECT value FROM events WHERE sync_id = $1 ORDER BY seq', [syncId]);
  return rows.map((r) => JSON.parse(r.value));
}

test.before(
  loudSetUp(
    async () => {
      fake = await startFakeStripe();
      fake.addKey(STRIPE_KEY, { account: fake.createAccount().id });
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'] },
        tunables: {
          airtable: { pollIntervalMs: SLOW_POLL_MS, cycleGapMs: 10 * SLOW_POLL_MS },
          stripe: { pollIntervalMs: SLOW_POLL_MS },
          workerTickMs: 250,
          decoder: { lagReportMs: 300 },
        },
        stripeUrl: fake.url,
      });
      account = await createAccount(svc, 'waiter');
      other = await createAccount(svc, 'someone else');
      base = svc.airtable.createBase({ name: 'Wait' });
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Points', type: 'number', options: { precision: 0 } },
      ]);
      base.createRecords('Tasks', [
        { Name: 'one', Points: 1 },
        { Name: 'two', Points: 2 },
      ]);
      const created = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(created.status, 201, created.text);
      airtableSync = created.body.id;
      airtableReader = created.body.database.url;
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test('the first wait answers after the first build, with its rows and events logged', async () => {
  const answer = await wait(airtableSync, account.token, '?timeout=120000');
  assert.is(answer.status, 200, answer.text);
  assert.equal(answer.body.ok, true, answer.text);
  assert.match(answer.body.lsn, /^[0-9A-F]+\/[0-9A-F]+$/);
  assert.is(answer.headers.get('cache-control'), 'no-store');
  const rows = await query<{ name: string }>(airtableReader, 'SELECT name FROM tasks ORDER BY name');
  assert.equal(
    rows.map((r) => r.name),
    ['one', 'two'],
  );
  const events = await eventsOf(airtableSync);
  assert.equal(
    events.map((e) => e.event),
    ['inserted', 'inserted'],
  );
});

test('Airtable: an upstream edit is in the database and the event log when the wait answers', async () => {
  const record = base.records('Tasks').find((r) => r.fields.Name === 'two')!;
  for (const points of [20, 21, 22]) {
    base.updateRecord('Tasks', record.id, { Points: points });
    const { value: answer, ms } = await timed(() => wait(airtableSync));
    assert.equal(answer.body.ok, true, answer.text);
    assert.ok(ms < SLOW_POLL_MS / 3, `answered in ${ms} ms: the wait started a change-capture poll`);
    const rows = await query<{ points: number }>(airtableReader, 'SELECT points FROM tasks WHERE id = $1', [record.id]);
    assert.is(Number(rows[0]!.points), points);
    const last = (await eventsOf(airtableSync)).at(-1)!;
    assert.equal([last.event, last.id, last.data.points], ['updated', record.id, points]);
  }
});

test('Airtable: a new field is only confirmed once a cycle has built it', async () => {
  base.addField('Tasks', { name: 'Notes', type: 'singleLineText' });
  const record = base.records('Tasks').find((r) => r.fields.Name === 'one')!;
  base.updateRecord('Tasks', record.id, { Notes: 'hello' });
  const { value: answer, ms } = await timed(() => wait(airtableSync));
  assert.equal(answer.body.ok, true, answer.text);
  assert.ok(ms < SLOW_POLL_MS / 3, `answered in ${ms} ms: the pause between cycles ended for it`);
  const rows = await query<{ notes: string | null }>(airtableReader, 'SELECT notes FROM tasks WHERE id = $1', [record.id]);
  assert.is(rows[0]!.notes, 'hello');
});

test('Airtable with debounce: the wait also waits for the held-back write', async () => {
  const debounced = svc.airtable.createBase({ name: 'Debounced' });
  debounced.createTable('Notes', [{ name: 'Text', type: 'singleLineText' }]);
  const [note] = debounced.createRecords('Notes', [{ Text: 'first' }]);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: debounced.id, api_key: AIRTABLE_TEST_TOKEN, settings: { debounce_ms: 1500 } },
  });
  assert.is(created.status, 201, created.text);
  assert.equal((await wait(created.body.id, account.token, '?timeout=120000')).body.ok, true, 'the first build');
  debounced.updateRecord('Notes', note!.id, { Text: 'second' });
  const { value: answer, ms } = await timed(() => wait(created.body.id));
  assert.equal(answer.body.ok, true, answer.text);
  assert.ok(ms >= 1000, `answered after ${ms} ms, not before the debounce`);
  assert.ok(ms < SLOW_POLL_MS / 3, `answered in ${ms} ms: the debounced write started a poll`);
  const rows = await query<{ text: string }>(created.body.database.url, 'SELECT text FROM notes WHERE id = $1', [note!.id]);
  assert.is(rows[0]!.text, 'second');
});

test('Stripe: a new customer is in the database and the event log when the wait answers', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: STRIPE_KEY } });
  assert.is(created.status, 201, created.text);
  const syncId = created.body.id as string;
  const reader = created.body.database.url as string;
  assert.equal((await wait(syncId, account.token, '?timeout=120000')).body.ok, true, 'the backfill');

  const url = new URL(fake.url);
  const stripe = new Stripe(STRIPE_KEY, { host: url.hostname, port: Number(url.port), protocol: 'http', apiVersion: STRIPE_API_VERSION as never });
  for (const name of ['Ada', 'Grace']) {
    const customer = await stripe.customers.create({ name, email: `${name.toLowerCase()}@example.com` });
    const { value: answer, ms } = await timed(() => wait(syncId));
    assert.equal(answer.body.ok, true, answer.text);
    assert.ok(ms < SLOW_POLL_MS / 3, `answered in ${ms} ms: the wait started a read of the events feed`);
    const rows = await query<{ name: string }>(reader, 'SELECT name FROM customer WHERE id = $1', [customer.id]);
    assert.equal(
      rows.map((r) => r.name),
      [name],
    );
    const events = await eventsOf(syncId);
    assert.ok(
      events.some((e) => e.event === 'inserted' && e.id === customer.id),
      'the insert is logged',
    );
  }
  // The admin token may wait on any sync.
  assert.equal((await wait(syncId, svc.adminToken)).body.ok, true);
});

test('timeouts: 0 and 1 answer at once; the answer says timeout', async () => {
  const { value: answer, ms } = await timed(() => wait(airtableSync, account.token, '?timeout=0'));
  assert.is(answer.status, 200);
  assert.equal(answer.body, { ok: false, reason: 'timeout' });
  assert.ok(ms < 2000, `${ms} ms`);
  const short = await wait(airtableSync, account.token, '?timeout=1');
  assert.is(short.body.ok, false);
  assert.is(short.body.reason, 'timeout');
  assert.is(short.body.waited_for, 'pass', 'it says what it waited for');
  assert.match(short.body.detail, /no pass of the sync that started after the request completed within 1 ms/);
});

test('bad timeouts are 400; no token 401; unknown and foreign syncs 404 alike', async () => {
  for (const bad of ['-1', '1.5', 'abc', '600001', '', '1e3']) {
    const answer = await wait(airtableSync, account.token, `?timeout=${bad}`);
    assert.is(answer.status, 400, `timeout=${bad}: ${answer.text}`);
    assert.is(answer.body.error.code, 'invalid_request');
  }
  assert.is((await wait(airtableSync, account.token, '?timeout=1&timeout=2')).status, 400);
  assert.is((await request(svc.api, 'GET', `/api/wait/${airtableSync}`)).status, 401);
  const unknown = await wait('syn_doesnotexist0000', account.token, '?timeout=0');
  const foreign = await wait(airtableSync, other.token, '?timeout=0');
  assert.is(unknown.status, 404);
  assert.is(foreign.status, 404);
  assert.equal(foreign.body.error.code, unknown.body.error.code);
});

test('a sync deleted during a wait ends it with 404', async () => {
  const doomed = svc.airtable.createBase({ name: 'Short-lived' });
  // Its cycles keep failing (the webhook cannot be made), so no pass completes.
  svc.airtable.faults.add({ match: { baseId: doomed.id, path: /webhooks/ }, kind: 'status', status: 503, times: Infinity });
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: other.token,
    body: { kind: 'airtable', base_id: doomed.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  const pending = wait(created.body.id, other.token, '?timeout=60000');
  await new Promise((r) => setTimeout(r, 300));
  await request(svc.api, 'DELETE', `/api/syncs/${created.body.id}`, { token: other.token });
  assert.is((await pending).status, 404);
});

test('a wait that times out while the upstream refuses the sync says so', async () => {
  // Airtable's answer to a base over its limit: 429 to every request, for 30 s.
  svc.airtable.faults.add({ match: { path: new RegExp(`/${base.id}/`) }, kind: 'status', status: 429, times: Infinity });
  try {
    const answer = await wait(airtableSync, account.token, '?timeout=4000');
    assert.is(answer.body.ok, false, answer.text);
    assert.is(answer.body.waited_for, 'pass');
    assert.match(answer.body.detail, /the upstream is limiting the sync: .*429/);
  } finally {
    svc.airtable.faults.clear();
  }
});

test.run();
