import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query } from './harness/postgres.ts';
import { airtableSyncBody, createAccount, request, startTestService, stripeSyncBody, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let alice: TestAccount;
let bob: TestAccount;

test.before(async () => {
  svc = await startTestService();
  alice = await createAccount(svc, 'alice');
  bob = await createAccount(svc, 'bob');
});
test.after(async () => svc.stop());

test('creating an account answers its token and event credentials once', async () => {
  const created = await request(svc.api, 'POST', '/api/accounts', { token: svc.adminToken, body: { name: 'carol' } });
  assert.is(created.status, 201);
  assert.match(created.body.id, /^acc_[a-z0-9]{14}$/);
  assert.is(created.body.name, 'carol');
  assert.match(created.body.api_token, /^trb_[A-Za-z0-9]{32}$/);
  assert.match(created.body.events.username, /^ev_/);
  assert.is(created.body.events.password.length, 32);
  assert.match(created.body.events.rest_url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(created.body.events.kafka_brokers, []);

  const listed = await request(svc.api, 'GET', '/api/accounts', { token: svc.adminToken });
  assert.is(listed.status, 200);
  const carol = listed.body.data.find((a: { id: string }) => a.id === created.body.id);
  assert.equal(Object.keys(carol).sort(), ['created_at', 'id', 'name']);
});

test('an Airtable sync is created with defaults, a database and event addresses', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: alice.token, body: airtableSyncBody() });
  assert.is(created.status, 201, created.text);
  const sync = created.body;
  assert.match(sync.id, /^syn_[a-z0-9]{14}$/);
  assert.is(sync.kind, 'airtable');
  assert.is(sync.account_id, alice.id);
  assert.is(sync.base_id, 'appAAAAAAAAAAAAAA');
  assert.equal(sync.settings, { turbo: false, debounce_ms: 0, lookup_as: 'text[]', intelligent_cast: true, stable_attachment_links: false });
  assert.match(sync.database.name, /^tr_[a-z0-9]{16}$/);
  assert.is(sync.events.topic_prefix, `svc.${sync.id}.`);
  assert.is(sync.status.indicator, 'normal');
  assert.not.ok('api_key' in sync);

  const url = new URL(sync.database.url);
  assert.is(url.pathname, `/${sync.database.name}`);
  assert.is(url.username, `${sync.database.name}_ro`);
  const meta = await query(sync.database.url, 'SELECT started_at, completed_at, duration_last FROM _sync_meta');
  assert.equal(meta, [{ started_at: null, completed_at: null, duration_last: null }]);
});

test('a Stripe sync takes settings and lists with its status', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: alice.token,
    body: { ...stripeSyncBody(), settings: { turbo: true } },
  });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body.settings, { turbo: true, connected_accounts: false });
  assert.not.ok('base_id' in created.body);

  const listed = await request(svc.api, 'GET', '/api/syncs', { token: alice.token });
  assert.is(listed.status, 200);
  const ids = listed.body.data.map((s: { id: string }) => s.id);
  assert.ok(ids.includes(created.body.id));
  for (const sync of listed.body.data) {
    assert.equal(Object.keys(sync.status).sort(), [
      'completed_at',
      'deliveries_behind',
      'deliveries_lag_seconds',
      'duration_last',
      'events_lag_seconds',
      'incomplete',
      'indicator',
      'lag_seconds',
      'last_error',
      'paced_cycle_s',
      'progress',
      'reason',
      'slowed_by',
      'started_at',
    ]);
  }
});

test('settings are patched, validated per kind, and kept', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: alice.token, body: airtableSyncBody('appBBBBBBBBBBBBBB') });
  const id = created.body.id;
  const patched = await request(svc.api, 'PATCH', `/api/syncs/${id}`, {
    token: alice.token,
    body: { settings: { debounce_ms: 250, lookup_as: 'text' } },
  });
  assert.is(patched.status, 200, patched.text);
  assert.equal(patched.body.settings, { turbo: false, debounce_ms: 250, lookup_as: 'text', intelligent_cast: true, stable_attachment_links: false });
  const shown = await request(svc.api, 'GET', `/api/syncs/${id}`, { token: alice.token });
  assert.equal(shown.body.settings, patched.body.settings);

  const negative = await request(svc.api, 'PATCH', `/api/syncs/${id}`, { token: alice.token, body: { settings: { debounce_ms: -1 } } });
  assert.is(negative.status, 400);
  assert.match(negative.body.error.message, /debounce_ms/);
  // Alice already syncs this Stripe account (one account syncs one Stripe account once).
  const dora = await createAccount(svc, 'dora');
  const stripe = await request(svc.api, 'POST', '/api/syncs', { token: dora.token, body: stripeSyncBody() });
  const foreign = await request(svc.api, 'PATCH', `/api/syncs/${stripe.body.id}`, {
    token: dora.token,
    body: { settings: { lookup_as: 'text' } },
  });
  assert.is(foreign.status, 400, 'Airtable-only settings are refused on a Stripe sync');
});

test('the same base twice in one account is a conflict', async () => {
  const first = await request(svc.api, 'POST', '/api/syncs', { token: bob.token, body: airtableSyncBody('appCCCCCCCCCCCCCC') });
  assert.is(first.status, 201);
  const second = await request(svc.api, 'POST', '/api/syncs', { token: bob.token, body: airtableSyncBody('appCCCCCCCCCCCCCC') });
  assert.is(second.status, 409);
  assert.is(second.body.error.code, 'conflict');
});

test('a sync still being created is neither listed nor found, so the list never names a sync that answers 404', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: bob.token, body: airtableSyncBody('appDDDDDDDDDDDDDD') });
  assert.is(created.status, 201, created.text);
  const listed = async () => (await request(svc.api, 'GET', '/api/syncs', { token: bob.token })).body.data.map((s: { id: string }) => s.id);
  assert.ok((await listed()).includes(created.body.id));
  // As a crash in the middle of creating it would leave it, until the reconciler finishes it.
  await query(svc.controlUrl, "UPDATE syncs SET state = 'provisioning' WHERE id = $1", [created.body.id]);
  try {
    assert.not.ok((await listed()).includes(created.body.id));
    assert.is((await request(svc.api, 'GET', `/api/syncs/${created.body.id}`, { token: bob.token })).status, 404);
  } finally {
    await query(svc.controlUrl, "UPDATE syncs SET state = 'active' WHERE id = $1", [created.body.id]);
  }
  assert.ok((await listed()).includes(created.body.id));
});

test('one account can neither see nor change another account’s syncs', async () => {
  const mine = await request(svc.api, 'POST', '/api/syncs', { token: alice.token, body: airtableSyncBody('appDDDDDDDDDDDDDD') });
  const id = mine.body.id;
  for (const [method, body] of [['GET'], ['PATCH', { settings: { turbo: true } }], ['DELETE']] as const) {
    const answer = await request(svc.api, method, `/api/syncs/${id}`, { token: bob.token, body });
    assert.is(answer.status, 404, `${method} by another account`);
    assert.is(answer.body.error.code, 'not_found');
  }
  const bobs = await request(svc.api, 'GET', '/api/syncs', { token: bob.token });
  assert.not.ok(bobs.body.data.some((s: { account_id: string }) => s.account_id !== bob.id));
  const still = await request(svc.api, 'GET', `/api/syncs/${id}`, { token: alice.token });
  assert.is(still.status, 200);
  assert.is(still.body.settings.turbo, false);

  const smuggled = await request(svc.api, 'POST', '/api/syncs', {
    token: bob.token,
    body: { ...airtableSyncBody('appEEEEEEEEEEEEEE'), account_id: alice.id },
  });
  assert.is(smuggled.status, 403, 'an account token cannot create in another account');
  const adminOnly = await request(svc.api, 'POST', '/api/accounts', { token: bob.token, body: { name: 'x' } });
  assert.is(adminOnly.status, 403);
});

test('the admin token sees every account and creates syncs for one', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: svc.adminToken,
    body: { ...stripeSyncBody(), account_id: bob.id },
  });
  assert.is(created.status, 201, created.text);
  assert.is(created.body.account_id, bob.id);
  const missing = await request(svc.api, 'POST', '/api/syncs', { token: svc.adminToken, body: stripeSyncBody() });
  assert.is(missing.status, 400);
  const unknown = await request(svc.api, 'POST', '/api/syncs', {
    token: svc.adminToken,
    body: { ...stripeSyncBody(), account_id: 'acc_nope' },
  });
  assert.is(unknown.status, 422);
  const all = await request(svc.api, 'GET', '/api/syncs', { token: svc.adminToken });
  const owners = new Set(all.body.data.map((s: { account_id: string }) => s.account_id));
  assert.ok(owners.has(alice.id) && owners.has(bob.id));
});

test('deleting a sync drops its database; keep_database keeps it readable', async () => {
  // A fresh account: one account syncs one Stripe account once, so the second comes after the first is gone.
  const erin = await createAccount(svc, 'erin');
  const gone = (await request(svc.api, 'POST', '/api/syncs', { token: erin.token, body: stripeSyncBody() })).body;

  const del = await request(svc.api, 'DELETE', `/api/syncs/${gone.id}`, { token: erin.token });
  assert.is(del.status, 200);
  assert.equal(del.body, { id: gone.id, deleted: true, database_kept: false });
  assert.is((await request(svc.api, 'GET', `/api/syncs/${gone.id}`, { token: erin.token })).status, 404);
  const kept = (await request(svc.api, 'POST', '/api/syncs', { token: erin.token, body: stripeSyncBody() })).body;

  const keep = await request(svc.api, 'DELETE', `/api/syncs/${kept.id}?keep_database=true`, { token: erin.token });
  assert.is(keep.status, 200);
  assert.is(keep.body.database_kept, true);
  const rows = await query(kept.database.url, 'SELECT count(*)::int AS n FROM _sync_meta');
  assert.equal(rows, [{ n: 1 }], 'the kept database still answers its reader');

  const admin = process.env.TEST_PG_ADMIN_URL!;
  const dbs = await query<{ datname: string }>(admin, 'SELECT datname FROM pg_database WHERE datname = ANY($1)', [[gone.database.name, kept.database.name]]);
  assert.equal(
    dbs.map((d) => d.datname),
    [kept.database.name],
  );
  const slots = await query(admin, 'SELECT slot_name FROM pg_replication_slots WHERE slot_name = ANY($1)', [[gone.database.name, kept.database.name]]);
  assert.equal(slots, [], 'no slot stays behind, even for a kept database');
  const bad = await request(svc.api, 'DELETE', `/api/syncs/${kept.id}?keep_database=maybe`, { token: erin.token });
  assert.is(bad.status, 404, 'already deleted');
});

test.run();
