/**
 * Several syncs in one database (`database_of` and `schema` on POST /api/syncs): a first
 * Airtable sync makes a database, a second one's tables go into a schema of it. Both are read
 * with the first sync's reader; each sync's events carry its own id; the proxy, the wait
 * endpoint, rebuilds, the console's table view and delete all work for the second; one slot
 * serves both. Every bad input is a clear 4xx that leaves nothing half-made.
 */
import Airtable from 'airtable';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { withDatabase } from '../src/db/sql.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { startProxy, type TestProxy } from './harness/proxy.ts';
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
let account: TestAccount;
let other: TestAccount;
let baseA: FakeBase;
let baseB: FakeBase;
let baseC: FakeBase;
let first: any;
let second: any;
let otherSync: string;
let proxy: TestProxy | undefined;

const admin = (method: string, route: string, body?: unknown) => request(svc.api, method, route, { token: svc.adminToken, body });
const airtableBody = (baseId: string, extra: Record<string, unknown> = {}) => ({
  kind: 'airtable',
  base_id: baseId,
  api_key: AIRTABLE_TEST_TOKEN,
  account_id: account.id,
  ...extra,
});
const adminUrlOf = (database: string) => withDatabase(serverAdminUrl(), database);
const schemasOf = async (database: string) =>
  (await query<{ nspname: string }>(adminUrlOf(database), "SELECT nspname FROM pg_namespace WHERE nspname !~ '^(pg_|information_schema)' ORDER BY 1")).map(
    (r) => r.nspname,
  );

async function failsWith(work: Promise<unknown>, message: RegExp): Promise<void> {
  const outcome = await work.then(
    () => 'succeeded',
    (error: unknown) => String((error as Error)?.message ?? error),
  );
  assert.match(outcome, message);
}

type Event = { event: string; id: string; collection: string; data: Record<string, unknown> | null };
async function events(syncId: string, afterSeq = 0): Promise<Array<Event & { topic: string; seq: number }>> {
  const rows = await query<{ topic: string; seq: string; value: string }>(
    svc.controlUrl,
    'SELECT topic, seq, value FROM events WHERE sync_id = $1 AND seq > $2 ORDER BY seq',
    [syncId, afterSeq],
  );
  return rows.map((r) => ({ ...JSON.parse(r.value), topic: r.topic, seq: Number(r.seq) }));
}
const lastSeq = async (syncId: string) => (await events(syncId)).at(-1)?.seq ?? 0;
const eventsUntil = (syncId: string, afterSeq: number, accept: (list: Event[]) => boolean, what: string) =>
  waitFor(
    what,
    async () => {
      const list = await events(syncId, afterSeq);
      return accept(list) ? list : undefined;
    },
    20_000,
  );

/** What a refused create must leave as it was: the syncs and the first database's schemas. */
async function everything() {
  return {
    syncs: await query(svc.controlUrl, 'SELECT id, state, schema, database_of FROM syncs ORDER BY id'),
    schemas: await schemasOf(first.database.name),
  };
}

async function refused(send: () => Promise<HttpAnswer>, status: number, message: RegExp, what: string): Promise<void> {
  // Read before the request is sent: read while it runs, the snapshot can hold the sync row
  // the request makes while provisioning, before it is refused and removed.
  const before = await everything();
  const got = await send();
  assert.is(got.status, status, `${what}: ${got.text}`);
  assert.match(got.body?.error?.message ?? '', message, what);
  assert.equal(await everything(), before, `${what}: nothing was made`);
}

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'] },
        // Never paced: a rebuild must follow at once; a paced cycle could hold it back up to 60 s.
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250, pacedCycleMs: 0 }, workerTickMs: 250, decoder: { lagReportMs: 300 } },
      });
      account = await createAccount(svc, 'acme');
      other = await createAccount(svc, 'globex');
      baseA = svc.airtable.createBase({ name: 'Tasks base' });
      baseA.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Points', type: 'number', options: { precision: 0 } },
      ]);
      baseA.createRecords('Tasks', [
        { Name: 'Plan', Points: 1 },
        { Name: 'Build', Points: 3 },
      ]);
      baseB = svc.airtable.createBase({ name: 'Notes base' });
      baseB.createTable('Notes', [{ name: 'Title', type: 'singleLineText' }]);
      baseB.createRecords('Notes', [{ Title: 'Hello' }, { Title: 'World' }]);
      baseC = svc.airtable.createBase({ name: 'Third base' });
      baseC.createTable('Notes', [{ name: 'Title', type: 'singleLineText' }]);
      baseC.createRecords('Notes', [{ Title: 'From C' }]);

      const made = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: baseA.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(made.status, 201, made.text);
      first = made.body;
      const elsewhere = await request(svc.api, 'POST', '/api/syncs', {
        token: other.token,
        body: { kind: 'airtable', base_id: baseB.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(elsewhere.status, 201, elsewhere.text);
      otherSync = elsewhere.body.id;
      await waitOk(svc, account.token, first.id);
    },
    () => svc,
  ),
);
test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
});

test('a sync made alone has schema public and shares nothing', () => {
  assert.is(first.database.schema, 'public');
  assert.is(first.database.database_of, null);
});

test('bad input to database_of and schema: a clear 4xx each, nothing made', async () => {
  await refused(
    () =>
      request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { ...airtableBody(baseB.id), account_id: undefined, database_of: first.id, schema: 'notes' },
      }),
    403,
    /database_of: set by the operator/,
    'an account token',
  );
  await refused(
    () => admin('POST', '/api/syncs', airtableBody(baseB.id, { database_of: otherSync, schema: 'notes' })),
    422,
    /database_of: no sync syn_\w+ in this account/,
    "another account's sync",
  );
  await refused(
    () => admin('POST', '/api/syncs', airtableBody(baseB.id, { database_of: 'syn_doesnotexist00', schema: 'notes' })),
    422,
    /database_of: no sync syn_doesnotexist00 in this account/,
    'an unknown sync',
  );
  await refused(() => admin('POST', '/api/syncs', airtableBody(baseB.id, { database_of: first.id })), 400, /schema: required with database_of/, 'no schema');
  await refused(() => admin('POST', '/api/syncs', airtableBody(baseB.id, { schema: 'notes' })), 400, /schema: only with database_of/, 'a schema alone');
  await refused(
    () => admin('POST', '/api/syncs', airtableBody(baseB.id, { database_of: first.id, schema: 'notes', region: 'us-west-2' })),
    400,
    /region: a sync made with database_of/,
    'with a region',
  );
  for (const [schema, message] of [
    ['Notes', /schema: "Notes" is not a valid name/],
    ['1notes', /schema: "1notes" is not a valid name/],
    ['no-tes', /schema: "no-tes" is not a valid name/],
    ['n'.repeat(59), /is not a valid name.*at most 58/],
    ['public', /schema: public is reserved/],
    ['pg_notes', /schema: pg_notes is reserved/],
    ['information_schema', /schema: information_schema is reserved/],
    ['notes_swap', /schema: notes_swap is reserved/],
  ] as const) {
    await refused(() => admin('POST', '/api/syncs', airtableBody(baseB.id, { database_of: first.id, schema })), 422, message, `schema ${schema}`);
  }
  await refused(
    () => admin('POST', '/api/syncs', { ...stripeSyncBody(), account_id: account.id, database_of: first.id, schema: 'payments' }),
    422,
    /database_of: stripe syncs cannot share/,
    'a Stripe sync',
  );
});

test('a second Airtable sync goes into a schema of the first one’s database, read with the same reader', async () => {
  const made = await admin('POST', '/api/syncs', airtableBody(baseB.id, { database_of: first.id, schema: 'notes_b' }));
  assert.is(made.status, 201, made.text);
  second = made.body;
  assert.is(second.database.name, first.database.name, 'the same database');
  assert.is(second.database.url, first.database.url, 'the same reader credentials');
  assert.is(second.database.schema, 'notes_b');
  assert.is(second.database.database_of, first.id);
  assert.is(second.database.connection_limit, first.database.connection_limit, "the reader's limits shown are the first sync's");
  assert.is(second.account_id, account.id);
  assert.equal(await schemasOf(first.database.name), ['notes_b', 'notes_b_swap', 'public', 'public_swap']);
  await waitOk(svc, account.token, second.id);

  const reader = first.database.url;
  assert.equal(
    (await query<{ name: string }>(reader, 'SELECT name FROM public.tasks ORDER BY name')).map((r) => r.name),
    ['Build', 'Plan'],
  );
  assert.equal(
    (await query<{ title: string }>(reader, 'SELECT title FROM notes_b.notes ORDER BY title')).map((r) => r.title),
    ['Hello', 'World'],
  );
  const metas = await query<{ done: boolean }>(
    reader,
    'SELECT completed_at IS NOT NULL AS done FROM notes_b._sync_meta UNION ALL SELECT completed_at IS NOT NULL FROM public._sync_meta',
  );
  assert.equal(metas, [{ done: true }, { done: true }], 'each schema has its own _sync_meta');
  // Its bookkeeping is apart and out of the reader's sight.
  const tables = await query<{ n: string }>(adminUrlOf(first.database.name), 'SELECT count(*) AS n FROM notes_b_swap._tables');
  assert.is(tables[0]!.n, '1');
  await failsWith(query(reader, 'SELECT * FROM notes_b_swap._state'), /permission denied/);
  // One slot, one decoder lease for the database.
  assert.equal((await query<{ n: string }>(serverAdminUrl(), 'SELECT count(*) AS n FROM pg_replication_slots WHERE database = $1', [first.database.name]))[0], {
    n: '1',
  });
  const leases = await query<{ id: string; leased: boolean }>(
    svc.controlUrl,
    'SELECT id, decoder_lease_owner IS NOT NULL AS leased FROM syncs WHERE id = ANY($1) ORDER BY database_of NULLS FIRST',
    [[first.id, second.id]],
  );
  assert.equal(leases, [
    { id: first.id, leased: true },
    { id: second.id, leased: false },
  ]);
});

test("the reader sees no other account's schema or database", async () => {
  const theirs = await request(svc.api, 'GET', `/api/syncs/${otherSync}`, { token: other.token });
  await failsWith(query(withDatabase(first.database.url, theirs.body.database.name), 'SELECT 1'), /permission denied|not permitted/);
  const listed = await query<{ nspname: string }>(
    first.database.url,
    "SELECT nspname FROM pg_namespace WHERE has_schema_privilege(oid, 'USAGE') AND nspname !~ '^pg_' ORDER BY 1",
  );
  assert.equal(
    listed.map((r) => r.nspname),
    ['information_schema', 'notes_b', 'public'],
  );
});

test('a taken schema name is a 409 naming it; so is one the database already has', async () => {
  await refused(
    () => admin('POST', '/api/syncs', airtableBody(baseC.id, { database_of: first.id, schema: 'notes_b' })),
    409,
    /schema: notes_b is taken in the database of sync/,
    'taken',
  );
  // Naming the second sync joins the first one's database: the same name is taken there too.
  await refused(
    () => admin('POST', '/api/syncs', airtableBody(baseC.id, { database_of: second.id, schema: 'notes_b' })),
    409,
    /schema: notes_b is taken/,
    'taken, through the second',
  );
  await query(adminUrlOf(first.database.name), 'CREATE SCHEMA stray');
  try {
    await refused(
      () => admin('POST', '/api/syncs', airtableBody(baseC.id, { database_of: first.id, schema: 'stray' })),
      409,
      /the database already has a schema stray/,
      'existing',
    );
  } finally {
    await query(adminUrlOf(first.database.name), 'DROP SCHEMA stray');
  }
});

test('events of each sync carry its own id: create, update and delete upstream', async () => {
  const seqB = await lastSeq(second.id);
  const seqA = await lastSeq(first.id);
  const [made] = baseB.createRecords('Notes', [{ Title: 'Added' }]);
  const inserted = await eventsUntil(second.id, seqB, (l) => l.some((e) => e.id === made!.id), 'the insert');
  const insert = inserted.find((e) => e.id === made!.id)! as Event & { topic: string };
  assert.is(insert.event, 'inserted');
  assert.is(insert.topic, `svc.${second.id}.notes`);
  assert.is(insert.data?.title, 'Added');
  baseB.updateRecord('Notes', made!.id, { Title: 'Changed' });
  await eventsUntil(second.id, seqB, (l) => l.some((e) => e.id === made!.id && e.event === 'updated' && e.data?.title === 'Changed'), 'the update');
  baseB.deleteRecords('Notes', [made!.id]);
  await eventsUntil(second.id, seqB, (l) => l.some((e) => e.id === made!.id && e.event === 'deleted'), 'the delete');
  for (const e of await events(second.id)) assert.ok(e.topic.startsWith(`svc.${second.id}.`), e.topic);
  assert.ok(!(await events(first.id, seqA)).some((e) => e.id === made!.id), "none of them is the first sync's");

  const [task] = baseA.createRecords('Tasks', [{ Name: 'Ship', Points: 5 }]);
  const ofA = await eventsUntil(first.id, seqA, (l) => l.some((e) => e.id === task!.id), 'the first sync still has its events');
  assert.is((ofA.find((e) => e.id === task!.id) as Event & { topic: string }).topic, `svc.${first.id}.tasks`);
});

test('a proxied create for the second sync lands in its schema at once; the wait endpoint answers for it', async () => {
  proxy = await startProxy(svc);
  const airtable = new Airtable({ apiKey: AIRTABLE_TEST_TOKEN, endpointUrl: `${proxy.url}/api.airtable.com`, noRetryIfRateLimited: true }).base(baseB.id);
  const created = await airtable('Notes').create({ Title: 'Through the proxy' });
  const rows = await query<{ title: string }>(first.database.url, 'SELECT title FROM notes_b.notes WHERE id = $1', [created.id]);
  assert.equal(rows, [{ title: 'Through the proxy' }]);
  assert.equal(await query(first.database.url, 'SELECT 1 FROM public.tasks WHERE id = $1', [created.id]), [], 'not in the first sync’s tables');

  baseB.createRecords('Notes', [{ Title: 'Before the wait' }]);
  const waited = await request(svc.api, 'GET', `/api/wait/${second.id}?timeout=20000`, { token: account.token });
  assert.is(waited.status, 200, waited.text);
  assert.is(waited.body.ok, true);
  assert.equal(await query(first.database.url, "SELECT 1 FROM notes_b.notes WHERE title = 'Before the wait'"), [{ '?column?': 1 }]);
});

test('a field added upstream rebuilds only the second sync’s table', async () => {
  const oids = async () =>
    (
      await query<{ tasks: string; notes: string }>(
        adminUrlOf(first.database.name),
        "SELECT 'public.tasks'::regclass::oid::text AS tasks, 'notes_b.notes'::regclass::oid::text AS notes",
      )
    )[0]!;
  const before = await oids();
  baseB.addField('Notes', { name: 'Stars', type: 'number', options: { precision: 0 } });
  // Two syncs of this base share its 3 req/s with their polls (every 250 ms here): a cycle of
  // three or four requests takes seconds, and the rebuild may need two of them. Idle it takes
  // 1-7 s; the bound is for a loaded machine (it was 20 s, and CI once needed more).
  await waitFor(
    'the rebuilt table',
    async () =>
      (
        await query(
          first.database.url,
          "SELECT 1 FROM information_schema.columns WHERE table_schema = 'notes_b' AND table_name = 'notes' AND column_name = 'stars'",
        )
      ).length === 1 || undefined,
    45_000,
  );
  const after = await oids();
  assert.is.not(after.notes, before.notes, 'the second sync’s table was rebuilt');
  assert.is(after.tasks, before.tasks, 'the first sync’s table was not');
  assert.equal(
    (await query(adminUrlOf(first.database.name), "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'notes_b_swap' AND tablename = 'notes'"))[0],
    { n: 0 },
  );
});

test('the API and the console show each sync its own tables and schema', async () => {
  const view = await request(svc.api, 'GET', `/api/syncs/${second.id}`, { token: account.token });
  assert.is(view.body.database.schema, 'notes_b');
  assert.is(view.body.database.database_of, first.id);
  const tablesB = await waitFor(
    'the console’s table view',
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${second.id}/tables`, { token: account.token });
      return answer.status === 200 && answer.body.sync_meta?.completed_at ? answer.body : undefined;
    },
    10_000,
  );
  assert.equal(
    tablesB.data.map((t: { name: string }) => t.name),
    ['notes'],
  );
  const tablesA = await request(svc.api, 'GET', `/api/syncs/${first.id}/tables`, { token: account.token });
  assert.equal(
    tablesA.body.data.map((t: { name: string }) => t.name),
    ['tasks'],
  );
  const page = await fetch(`${svc.api}/console/views/sync-connect.js`);
  assert.match(await page.text(), /search_path/, 'the connection instructions say how to reach the schema');
  const limits = await admin('PATCH', `/api/syncs/${second.id}`, { reader_statement_timeout_ms: 1000 });
  assert.is(limits.status, 409, limits.text);
  assert.match(limits.body.error.message, new RegExp(`reads through the reader of sync ${first.id}`));
});

test('deleting the first sync while the second uses its database is a 409 naming it', async () => {
  const answer = await request(svc.api, 'DELETE', `/api/syncs/${first.id}`, { token: account.token });
  assert.is(answer.status, 409, answer.text);
  assert.match(answer.body.error.message, new RegExp(`${second.id} \\(schema notes_b\\)`));
  assert.equal((await query<{ state: string }>(svc.controlUrl, 'SELECT state FROM syncs WHERE id = $1', [first.id]))[0], { state: 'active' });
});

test('deleting the second sync drops only its schemas; the name can be used again, by a sync of its own', async () => {
  const deleted = await request(svc.api, 'DELETE', `/api/syncs/${second.id}`, { token: account.token });
  assert.is(deleted.status, 200, deleted.text);
  assert.equal(await schemasOf(first.database.name), ['public', 'public_swap']);
  assert.equal(await query(svc.controlUrl, 'SELECT 1 FROM syncs WHERE id = $1', [second.id]), []);
  assert.equal(
    (await query<{ name: string }>(first.database.url, 'SELECT name FROM public.tasks ORDER BY name')).map((r) => r.name),
    ['Build', 'Plan', 'Ship'],
  );

  // A new sync takes the name: its events are its own, not the deleted sync's.
  const made = await admin('POST', '/api/syncs', airtableBody(baseC.id, { database_of: first.id, schema: 'notes_b' }));
  assert.is(made.status, 201, made.text);
  const third = made.body;
  const list = await eventsUntil(third.id, 0, (l) => l.some((e) => e.data?.title === 'From C'), 'the third sync’s first events');
  assert.ok(list.every((e) => (e as Event & { topic: string }).topic.startsWith(`svc.${third.id}.`)));
  assert.equal(
    await query(svc.controlUrl, "SELECT 1 FROM events WHERE sync_id = $1 AND value LIKE '%From C%'", [second.id]),
    [],
    'nothing goes to the deleted sync',
  );

  const gone = await request(svc.api, 'DELETE', `/api/syncs/${third.id}`, { token: account.token });
  assert.is(gone.status, 200, gone.text);
  const last = await request(svc.api, 'DELETE', `/api/syncs/${first.id}`, { token: account.token });
  assert.is(last.status, 200, last.text);
  assert.equal(await query(serverAdminUrl(), 'SELECT 1 FROM pg_database WHERE datname = $1', [first.database.name]), []);
});

test.run();
