/**
 * The pool of target servers, against two real PostgreSQL servers (the test run's, which the
 * service is configured with, and a second one) and a third that runs with wal_level=replica.
 * A sync placed in a region gets its database on that region's server with the most room;
 * everything that connects to a sync's database (provisioner, sync runner, decoder, proxy
 * write-through, delete) reaches that server. The operator's routes refuse every bad input with
 * a clear 4xx and leave nothing half-made.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { loadConfig } from '../src/config.ts';
import { secretKeyFile } from '../src/control/bootstrap-files.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { ServerPool } from '../src/control/servers.ts';
import { SyncStore } from '../src/control/syncs.ts';
import { withCredentials } from '../src/db/sql.ts';
import { newDatabaseName, newSyncId } from '../src/ids.ts';
import { freePort } from './harness/ports.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';
import { fileLogger } from './harness/test-log.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  loudSetUp,
  request,
  startTestService,
  stripeSyncBody,
  waitOk,
  type HttpAnswer,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

let svc: TestService;
let second: SecondServer;
let replica: SecondServer;
let account: TestAccount;
let base: FakeBase;
let firstId: string;
let secondId: string;
/** The syncs made so far, by name, with the server each is on. */
const syncs = new Map<string, { id: string; database: string }>();

const sharedPort = () => Number(new URL(serverAdminUrl()).port);
const admin = (method: string, route: string, body?: unknown) => request(svc.api, method, route, { token: svc.adminToken, body });
const newSync = (body: Record<string, unknown>) => request(svc.api, 'POST', '/api/syncs', { token: account.token, body });
const airtableBody = (baseId: string, extra: Record<string, unknown> = {}) => ({ kind: 'airtable', base_id: baseId, api_key: AIRTABLE_TEST_TOKEN, ...extra });

/** Sync databases on a server, by name. */
async function databasesOn(adminUrl: string): Promise<string[]> {
  return (await query<{ datname: string }>(adminUrl, "SELECT datname FROM pg_database WHERE datname LIKE 'tr\\_%' ORDER BY 1")).map((r) => r.datname);
}

/** What a refused request must leave as it was: the control database's servers and syncs, and the databases on both servers. */
async function everything() {
  const ours = new Set((await query<{ name: string }>(svc.controlUrl, 'SELECT database_name AS name FROM syncs')).map((r) => r.name));
  return {
    servers: await query(svc.controlUrl, 'SELECT id, region, capacity, draining FROM servers ORDER BY id'),
    syncs: await query(svc.controlUrl, 'SELECT id, server_id FROM syncs ORDER BY id'),
    // Of the shared server, only this service's databases: other test files make theirs there meanwhile.
    shared: (await databasesOn(serverAdminUrl())).filter((name) => ours.has(name)),
    second: await databasesOn(second.adminUrl),
  };
}

function refused(answer: HttpAnswer, status: number, message: RegExp, what: string): void {
  assert.is(answer.status, status, `${what}: ${answer.text}`);
  assert.match(answer.body?.error?.message ?? '', message, what);
  for (const server of [second, replica]) {
    assert.not.ok(answer.text.includes(new URL(server.adminUrl).password), `${what}: no password comes back`);
  }
}

test.before(
  loudSetUp(
    async () => {
      [second, replica] = await Promise.all([startSecondServer(), startSecondServer({ walLevel: 'replica', maxConnections: 20 })]);
      svc = await startTestService({
        // TRIBUTARY_DEFAULT_REGION=eu: the configured server joins the pool in eu, and syncs that name no region go there.
        config: { roles: ['api', 'sync', 'decoder', 'proxy', 'events'], defaultRegion: 'eu' },
        airtable: { rateLimit: false },
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, stripe: { pollIntervalMs: 250 }, workerTickMs: 250 },
      });
      account = await createAccount(svc, 'pooled');
      base = svc.airtable.createBase({ name: 'Pooled' });
      base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords('Tasks', [{ Name: 'one' }, { Name: 'two' }]);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await second?.stop();
  await replica?.stop();
});

test('the default region is us-west-2 unless TRIBUTARY_DEFAULT_REGION names another', () => {
  assert.is(loadConfig({}).defaultRegion, 'us-west-2');
  assert.is(loadConfig({ TRIBUTARY_DEFAULT_REGION: 'eu-central-1' }).defaultRegion, 'eu-central-1');
  assert.throws(() => loadConfig({ TRIBUTARY_DEFAULT_REGION: 'EU Central' }), /TRIBUTARY_DEFAULT_REGION must be lower-case letters/);
});

test('the configured server is the first member, in the default region, with a place per replication slot', async () => {
  const listed = await admin('GET', '/api/servers');
  assert.is(listed.status, 200, listed.text);
  assert.is(listed.body.data.length, 1);
  const { id, created_at, ...first } = listed.body.data[0];
  assert.match(id, /^srv_[a-z0-9]{14}$/);
  assert.ok(Date.parse(created_at) > 0);
  const [slots] = await query<{ n: number }>(serverAdminUrl(), "SELECT current_setting('max_replication_slots')::int AS n");
  // The test run's server is started as the service starts its own: with a bound on the WAL its slots keep.
  assert.equal(first, {
    region: 'eu',
    capacity: slots!.n,
    syncs: 0,
    free: slots!.n,
    draining: false,
    configured: true,
    max_slot_wal_keep_size_mb: 1024,
    // Read only where the service started the server (the embedded one): not this run's.
    free_disk_bytes: null,
    warnings: [],
  });
  firstId = id;
});

test("the routes are the operator's: an account token gets 403 and changes nothing", async () => {
  const before = await everything();
  const asAccount = (method: string, route: string, body?: unknown) => request(svc.api, method, route, { token: account.token, body });
  for (const answer of [
    await asAccount('POST', '/api/servers', { url: second.adminUrl, region: 'eu', capacity: 3 }),
    await asAccount('GET', '/api/servers'),
    await asAccount('GET', `/api/servers/${firstId}`),
    await asAccount('PATCH', `/api/servers/${firstId}`, { draining: true }),
    await asAccount('DELETE', `/api/servers/${firstId}`),
  ]) {
    refused(answer, 403, /needs the operator \(admin\) token/, 'an account token');
  }
  assert.equal(await everything(), before);
});

test('a server that cannot hold sync databases is refused with a 4xx that says why, and nothing is added', async () => {
  const before = await everything();
  const add = (body: Record<string, unknown>) => admin('POST', '/api/servers', { region: 'eu', capacity: 3, ...body });
  const secondAt = (change: (url: URL) => void) => {
    const url = new URL(second.adminUrl);
    change(url);
    return url.toString();
  };
  refused(await add({ url: 'not a url' }), 400, /^url: must be a postgres:\/\/ or postgresql:\/\/ URL/, 'not a URL');
  refused(await add({ url: secondAt((u) => void (u.port = '')) }), 400, /^url: must name the port/, 'no port');
  refused(await add({ url: `${second.adminUrl}?host=/var/run/postgresql` }), 400, /^url: the parameter host is not accepted/, 'a host parameter');
  refused(await add({ url: 'postgres://u:p@%2Fvar%2Frun%2Fpostgresql:5432/db' }), 400, /socket paths are not accepted/, 'a socket path');
  refused(await add({ url: second.adminUrl, region: 'EU West' }), 400, /^region: must be lower-case letters, digits and hyphens/, 'a region name');
  refused(await add({ url: second.adminUrl, capacity: 0 }), 400, /^capacity: /, 'no capacity');
  refused(await admin('POST', '/api/servers', { url: second.adminUrl, capacity: 3 }), 400, /^region: Required/, 'no region');
  refused(await add({ url: second.adminUrl, password: 'x' }), 400, /Unrecognized key/, 'an unknown field');

  refused(
    await add({ url: `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres` }),
    422,
    /^cannot connect to the server: refused \(nothing accepts connections/,
    'a closed port',
  );
  refused(
    await add({ url: 'postgres://postgres:x@no-such-host.invalid:5432/postgres' }),
    422,
    /^url: unreachable \(the host could not be resolved\)/,
    'no such host',
  );
  refused(await add({ url: secondAt((u) => void (u.password = 'wrong')) }), 422, /^cannot connect to the server: authentication failed$/, 'a wrong password');
  refused(await add({ url: replica.adminUrl }), 422, /^url cannot host sync databases: wal_level is replica, it must be logical$/, 'wal_level=replica');
  refused(
    await add({ url: second.adminUrl, capacity: 1100 }),
    422,
    /^url cannot host sync databases: max_replication_slots \(1000, 0 used\) leaves room for 1000 more slots, not 1100; max_wal_senders \(1000, 0 used\) leaves room for 1000 more WAL senders, not 1100$/,
    'too few slots and WAL senders',
  );
  await query(second.adminUrl, "CREATE ROLE weak LOGIN PASSWORD 'weak-password'");
  refused(
    await add({ url: withCredentials(second.adminUrl, 'weak', 'weak-password') }),
    422,
    /^url cannot host sync databases: the role lacks CREATEDB; the role lacks CREATEROLE; the role lacks REPLICATION$/,
    'a role without the rights',
  );
  refused(await add({ url: serverAdminUrl() }), 409, new RegExp(`^url: this server is already in the pool as ${firstId}$`), 'the configured server again');
  const byName = new URL(serverAdminUrl());
  byName.hostname = 'localhost';
  refused(await add({ url: byName.toString() }), 409, /already in the pool/, 'the configured server by another name');

  assert.equal(await everything(), before, 'no server was added, no database made');
  const [maintenance] = await query<{ acl: string | null }>(second.adminUrl, "SELECT datacl::text AS acl FROM pg_database WHERE datname = 'postgres'");
  assert.is(maintenance!.acl, null, "a refused server's databases are left as they were");
});

/** Sets a server's max_slot_wal_keep_size (a reload takes it) and waits until a new session sees it. */
async function boundWal(server: SecondServer, setting: string): Promise<void> {
  await query(server.adminUrl, `ALTER SYSTEM SET max_slot_wal_keep_size = '${setting}'`);
  await query(server.adminUrl, 'SELECT pg_reload_conf()');
  const want = setting === '-1' ? '-1' : setting.replace(/MB$/, '');
  for (let i = 0; i < 50; i++) {
    const [row] = await query<{ mb: string }>(server.adminUrl, "SELECT setting AS mb FROM pg_settings WHERE name = 'max_slot_wal_keep_size'");
    if (row?.mb === want) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`max_slot_wal_keep_size did not become ${setting}`);
}

test('a new member: 201 without its URL, which is kept sealed; readers are shut out of its maintenance databases', async () => {
  // Without a bound on the WAL its slots keep, it joins, and says so wherever it is shown.
  await boundWal(second, '-1');
  const added = await admin('POST', '/api/servers', { url: second.adminUrl, region: 'eu', capacity: 3 });
  assert.is(added.status, 201, added.text);
  secondId = added.body.id;
  assert.equal(added.body, {
    id: secondId,
    region: 'eu',
    capacity: 3,
    syncs: 0,
    free: 3,
    draining: false,
    configured: false,
    max_slot_wal_keep_size_mb: -1,
    free_disk_bytes: null,
    warnings: [added.body.warnings[0]],
    created_at: added.body.created_at,
  });
  assert.match(added.body.warnings[0], /^max_slot_wal_keep_size is -1 \(no bound\): .*one stuck decoder can fill this server's disk/);
  assert.ok(svc.logs.text.includes('max_slot_wal_keep_size is -1 (no bound)'), 'and the log says it');
  assert.match(secondId, /^srv_[a-z0-9]{14}$/);
  const [row] = await query<{ url_enc: string }>(svc.controlUrl, 'SELECT url_enc FROM servers WHERE id = $1', [secondId]);
  assert.match(row!.url_enc, /^v1:/);
  assert.not.ok(row!.url_enc.includes(new URL(second.adminUrl).password), 'sealed at rest');

  const listed = await admin('GET', '/api/servers');
  assert.equal(
    listed.body.data.map((s: { id: string }) => s.id),
    [firstId, secondId],
  );
  const shown = await admin('GET', `/api/servers/${secondId}`);
  assert.equal(shown.body, added.body);
  for (const answer of [added, listed, shown]) {
    assert.not.ok(answer.text.includes(new URL(second.adminUrl).password), 'the URL never comes back');
    assert.not.ok(answer.text.includes(String(second.port)), 'nor its port');
  }
  assert.not.ok(svc.logs.text.includes(new URL(second.adminUrl).password), 'nor reaches the log');

  refused(await admin('POST', '/api/servers', { url: second.adminUrl, region: 'us-east-1', capacity: 1 }), 409, /already in the pool as srv_/, 'twice');
  const [open] = await query<{ ok: boolean }>(second.adminUrl, "SELECT has_database_privilege('public', 'postgres', 'CONNECT') AS ok");
  assert.is(open!.ok, false, 'PUBLIC may no longer connect to its postgres database');

  // Bounded since: read again when the member is changed, and the warning is gone.
  await boundWal(second, '512MB');
  const changed = await admin('PATCH', `/api/servers/${secondId}`, { draining: false });
  assert.equal([changed.status, changed.body.max_slot_wal_keep_size_mb, changed.body.warnings], [200, 512, []]);
  assert.equal((await admin('GET', `/api/servers/${secondId}`)).body.warnings, []);
});

test('a sync in region eu goes to the member with the most room; sync, decoder and proxy all reach that server', async () => {
  // The configured member keeps one place; the second has three.
  const narrowed = await admin('PATCH', `/api/servers/${firstId}`, { capacity: 1 });
  assert.is(narrowed.status, 200, narrowed.text);
  assert.equal([narrowed.body.capacity, narrowed.body.free], [1, 1]);

  const created = await newSync(airtableBody(base.id, { region: 'eu' }));
  assert.is(created.status, 201, created.text);
  const { id, database } = created.body;
  syncs.set('placed', { id, database: database.name });
  assert.is(database.region, 'eu');
  assert.is(Number(new URL(database.url).port), second.port, 'the reader URL points at the second server');
  assert.equal(await databasesOn(second.adminUrl), [database.name]);
  assert.not.ok((await databasesOn(serverAdminUrl())).includes(database.name), 'nothing on the configured server');

  await waitOk(svc, account.token, id, 60_000);
  const rows = await query<{ name: string }>(database.url, 'SELECT name FROM tasks ORDER BY name');
  assert.equal(
    rows.map((r) => r.name),
    ['one', 'two'],
  );

  // The decoder reads that server: its slot there is in use, and a change upstream arrives as an event.
  const [created3] = base.createRecords('Tasks', [{ Name: 'three' }]);
  await waitOk(svc, account.token, id, 60_000);
  const [slot] = await query<{ active: boolean }>(second.adminUrl, 'SELECT active FROM pg_replication_slots WHERE slot_name = $1', [database.name]);
  assert.is(slot?.active, true, "the decoder holds the slot on the sync's server");
  const events = await query<{ record_id: string; event: string }>(
    svc.controlUrl,
    "SELECT record_id, value::jsonb->>'event' AS event FROM events WHERE sync_id = $1 ORDER BY seq",
    [id],
  );
  assert.ok(
    events.some((e) => e.record_id === created3!.id && e.event === 'inserted'),
    JSON.stringify(events),
  );

  // The proxy writes through to that server: a read right after the answer sees the change.
  const proxied = await fetch(`http://127.0.0.1:${svc.service.proxyPort}/api.airtable.com/v0/${base.id}/Tasks/${created3!.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ fields: { Name: 'three, edited through the proxy' } }),
  });
  assert.is(proxied.status, 200, await proxied.text());
  const [written] = await query<{ name: string }>(database.url, 'SELECT name FROM tasks WHERE id = $1', [created3!.id]);
  assert.is(written?.name, 'three, edited through the proxy');

  const server = await admin('GET', `/api/servers/${secondId}`);
  assert.equal([server.body.syncs, server.body.free], [1, 2]);
});

test('placement follows free capacity; a draining server gets no new sync; a full or unknown region is a 422 that leaves nothing', async () => {
  // No region: the default (eu). The second has 2 places left, the configured member 1.
  const stripe = await newSync(stripeSyncBody());
  assert.is(stripe.status, 201, stripe.text);
  assert.is(stripe.body.database.region, 'eu');
  assert.is(Number(new URL(stripe.body.database.url).port), second.port, 'the most room: the second');
  syncs.set('stripe', { id: stripe.body.id, database: stripe.body.database.name });

  const drained = await admin('PATCH', `/api/servers/${secondId}`, { draining: true });
  assert.is(drained.status, 200, drained.text);
  assert.equal([drained.body.draining, drained.body.free], [true, 1]);
  const onFirst = await newSync(airtableBody('appBBBBBBBBBBBBBB'));
  assert.is(onFirst.status, 201, onFirst.text);
  assert.is(Number(new URL(onFirst.body.database.url).port), sharedPort(), 'the second drains: the configured member');
  syncs.set('first', { id: onFirst.body.id, database: onFirst.body.database.name });

  const before = await everything();
  refused(await newSync(airtableBody('appCCCCCCCCCCCCCC')), 422, /^region eu: no server in this region can take a new sync$/, 'a full region');
  refused(
    await newSync(airtableBody('appCCCCCCCCCCCCCC', { region: 'us-west-2' })),
    422,
    /^region us-west-2: no server in this region can take a new sync$/,
    'an unknown region: the same answer, so no name is told to be a region',
  );
  refused(await newSync(airtableBody('appCCCCCCCCCCCCCC', { region: 'Mars!' })), 400, /^region: must be lower-case letters/, 'a bad region name');
  refused(
    await newSync({ ...stripeSyncBody(), database_url: second.adminUrl, region: 'eu' }),
    400,
    /^region: a customer-owned server \(database_url\) has no region/,
    'region with database_url',
  );
  // A tenant's database_url never names a pool server (no password oracle for them).
  const other = await createAccount(svc, 'prober');
  refused(
    await request(svc.api, 'POST', '/api/syncs', { token: other.token, body: { ...stripeSyncBody(), database_url: second.adminUrl } }),
    422,
    /names one of Tributary's own servers/,
    'a pool server as database_url',
  );
  assert.equal(await everything(), before, 'no sync row, no database');

  const reopened = await admin('PATCH', `/api/servers/${secondId}`, { draining: false });
  assert.is(reopened.body.free, 1);
  const last = await newSync(airtableBody('appCCCCCCCCCCCCCC'));
  assert.is(last.status, 201, last.text);
  assert.is(Number(new URL(last.body.database.url).port), second.port);
  syncs.set('last', { id: last.body.id, database: last.body.database.name });
  const listed = await admin('GET', '/api/servers');
  assert.equal(
    listed.body.data.map((s: { syncs: number; free: number }) => [s.syncs, s.free]),
    [
      [1, 0],
      [3, 0],
    ],
  );
});

test('a raised capacity is checked against the free slots; bad changes are 4xx', async () => {
  refused(
    await admin('PATCH', `/api/servers/${secondId}`, { capacity: 1400 }),
    422,
    /max_replication_slots \(1000, 3 used\) leaves room for 997 more slots, not 1397/,
    'past the slots',
  );
  refused(await admin('PATCH', `/api/servers/${secondId}`, {}), 400, /give capacity or draining/, 'nothing to change');
  refused(await admin('PATCH', `/api/servers/${secondId}`, { capacity: -1 }), 400, /^capacity: /, 'a negative capacity');
  refused(await admin('PATCH', '/api/servers/srv_nope', { draining: true }), 404, /server srv_nope not found/, 'an unknown server');
  refused(await admin('GET', '/api/servers/srv_nope'), 404, /server srv_nope not found/, 'an unknown server');
  const raised = await admin('PATCH', `/api/servers/${secondId}`, { capacity: 4 });
  assert.equal([raised.status, raised.body.capacity, raised.body.free], [200, 4, 1]);
});

test("creates at once take a server's last place once", async () => {
  // The second has one place left (capacity 4, three syncs), the configured member none. Eight
  // inserts of eight accounts at once (no account lock between them): one place, one winner.
  const racers = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((n) => createAccount(svc, `racer ${n}`)));
  const box = SecretBox.fromBase64((await secretKeyFile(svc.dataDir)).value);
  const control = new pg.Pool({ connectionString: svc.controlUrl, max: racers.length });
  const store = new SyncStore(control, box);
  try {
    const outcomes = await Promise.allSettled(
      racers.map((racer) => {
        const databaseName = newDatabaseName();
        return store.insert({
          id: newSyncId(),
          accountId: racer.id,
          kind: 'stripe',
          baseId: null,
          upstreamAccountId: null,
          apiKey: 'sk_test_racer',
          settings: {},
          databaseName,
          databaseRole: `${databaseName}_ro`,
          databasePassword: 'unused',
          customServerUrl: null,
          region: 'eu',
          upstreamName: null,
          describeUpstream: () => 'this Stripe key',
        });
      }),
    );
    const won = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    const lost = outcomes.flatMap((o) => (o.status === 'rejected' ? [(o.reason as Error).message] : []));
    assert.is(won.length, 1, `one winner: ${lost.join('; ')}`);
    assert.is(won[0]!.serverId, secondId);
    assert.equal(lost, Array(7).fill('region eu: no server in this region can take a new sync'));
    const server = await admin('GET', `/api/servers/${secondId}`);
    assert.equal([server.body.syncs, server.body.capacity, server.body.free], [4, 4, 0]);
    await store.remove(won[0]!.id);
  } finally {
    await control.end();
  }
});

test('syncs made before the pool belong to the configured member at the next start', async () => {
  const { id } = syncs.get('first')!;
  await query(svc.controlUrl, 'UPDATE syncs SET server_id = NULL WHERE id = $1', [id]);
  const box = SecretBox.fromBase64((await secretKeyFile(svc.dataDir)).value);
  const control = new pg.Pool({ connectionString: svc.controlUrl, max: 2 });
  try {
    await new ServerPool({ pool: control, box, configuredUrl: serverAdminUrl(), logger: fileLogger() }).ensureConfigured('eu');
  } finally {
    await control.end();
  }
  const [row] = await query<{ server_id: string }>(svc.controlUrl, 'SELECT server_id FROM syncs WHERE id = $1', [id]);
  assert.is(row!.server_id, firstId);
  assert.is((await admin('GET', '/api/servers')).body.data.length, 2, 'a pool that has members gets none');
});

test('a server leaves the pool only once it holds no sync; a deleted sync leaves nothing on its server', async () => {
  refused(await admin('DELETE', `/api/servers/${secondId}`), 409, new RegExp(`^server ${secondId} holds 3 syncs`), 'the second, with syncs');
  refused(await admin('DELETE', `/api/servers/${firstId}`), 409, new RegExp(`^server ${firstId} holds 1 sync:`), 'the configured member, with a sync');

  const placed = syncs.get('placed')!;
  const deleted = await request(svc.api, 'DELETE', `/api/syncs/${placed.id}`, { token: account.token });
  assert.is(deleted.status, 200, deleted.text);
  assert.not.ok((await databasesOn(second.adminUrl)).includes(placed.database), 'its database is gone from the second server');
  assert.equal(await query(second.adminUrl, 'SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [placed.database]), [], 'and its slot');
  assert.equal(await query(second.adminUrl, 'SELECT 1 FROM pg_roles WHERE rolname = $1', [`${placed.database}_ro`]), [], 'and its reader');

  for (const name of ['stripe', 'first', 'last']) {
    const answer = await request(svc.api, 'DELETE', `/api/syncs/${syncs.get(name)!.id}`, { token: svc.adminToken });
    assert.is(answer.status, 200, answer.text);
  }
  assert.equal(await databasesOn(second.adminUrl), []);
  const removed = await admin('DELETE', `/api/servers/${secondId}`);
  assert.equal([removed.status, removed.body], [200, { id: secondId, deleted: true }]);
  refused(await admin('GET', `/api/servers/${secondId}`), 404, /not found/, 'a removed server');
  refused(await admin('DELETE', `/api/servers/${secondId}`), 404, /not found/, 'removed twice');
  const firstGone = await admin('DELETE', `/api/servers/${firstId}`);
  assert.is(firstGone.status, 200, firstGone.text);
  assert.equal((await admin('GET', '/api/servers')).body.data, []);
  refused(await newSync(stripeSyncBody()), 422, /^region eu: no server in this region can take a new sync$/, 'an empty pool');
});

test.run();
