import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { waitForCycle, waitForRows } from './harness/airtable.ts';
import { errorOf, query } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let base: FakeBase;
let syncId: string;
let reader: string;

const RECORD = {
  Name: 'First',
  Email: 'a@example.com',
  Url: 'https://example.com',
  Long: 'line 1\nline 2',
  Phone: '(555) 123-4567',
  Num: 21.5,
  Pct: 0.5,
  Money: 9.99,
  Stars: 4,
  Dur: 5400,
  Check: true,
  Day: '2022-09-05',
  When: '2022-09-05T10:30:00.000Z',
  Status: 'Todo',
  Tags: ['a', 'b'],
  Owner: { email: 'kim@example.com' },
  Team: [{ email: 'kim@example.com' }, { email: 'lee@example.com' }],
  Code: { text: '12345', type: 'upce' },
};

test.before(async () => {
  svc = await startTestService({
    config: { roles: ['api', 'sync'] },
    // Sweeps never paced: its tests wait for whole cycles (pacing is airtable.pace.test's subject).
    tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250, pacedCycleMs: 0 }, workerTickMs: 250 },
  });
  account = await createAccount(svc);
  base = svc.airtable.createBase({ name: 'Projects 🚀' });
  base.addCollaborator({ email: 'kim@example.com', name: 'Kim' });
  base.addCollaborator({ email: 'lee@example.com', name: 'Lee' });
  base.createTable('Clients', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Revenue', type: 'currency' },
  ]);
  base.createTable('Everything!', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'ID', type: 'singleLineText' },
    { name: 'Email', type: 'email' },
    { name: 'Url', type: 'url' },
    { name: 'Long', type: 'multilineText' },
    { name: 'Phone', type: 'phoneNumber' },
    { name: 'Num', type: 'number', options: { precision: 2 } },
    { name: 'Pct', type: 'percent' },
    { name: 'Money', type: 'currency' },
    { name: 'Stars', type: 'rating' },
    { name: 'Auto', type: 'autoNumber' },
    { name: 'Dur', type: 'duration' },
    { name: 'Check', type: 'checkbox' },
    { name: 'Day', type: 'date' },
    { name: 'When', type: 'dateTime' },
    { name: 'Created', type: 'createdTime' },
    { name: 'Modified', type: 'lastModifiedTime' },
    { name: 'Status', type: 'singleSelect', options: { choices: [{ name: 'Todo' }, { name: 'Done' }] } },
    { name: 'Tags', type: 'multipleSelects', options: { choices: [{ name: 'a' }, { name: 'b' }] } },
    { name: 'Owner', type: 'singleCollaborator' },
    { name: 'Creator', type: 'createdBy' },
    { name: 'Editor', type: 'lastModifiedBy' },
    { name: 'Team', type: 'multipleCollaborators' },
    { name: 'Files', type: 'multipleAttachments' },
    { name: 'Code', type: 'barcode' },
    { name: 'Go', type: 'button', options: { label: 'Go' } },
    { name: 'AI', type: 'aiText' },
    { name: 'Future', type: 'hologram' },
  ]);
  const clients = base.table('Clients');
  const revenue = clients.fields.find((f) => f.name === 'Revenue')!.id;
  base.addField('Everything!', {
    name: 'Client',
    type: 'multipleRecordLinks',
    options: { linkedTableId: clients.id, prefersSingleRecordLink: true },
  });
  const many = base.addField('Everything!', { name: 'Clients', type: 'multipleRecordLinks', options: { linkedTableId: clients.id } });
  base.addField('Everything!', { name: 'Client count', type: 'count', options: { recordLinkFieldId: many.id } });
  base.addField('Everything!', {
    name: 'Client names',
    type: 'multipleLookupValues',
    options: { recordLinkFieldId: many.id, fieldIdInLinkedTable: clients.primaryFieldId },
  });
  base.addField('Everything!', {
    name: 'Client revenue',
    type: 'rollup',
    options: { recordLinkFieldId: many.id, fieldIdInLinkedTable: revenue, function: 'SUM' },
  });
  base.addField('Everything!', { name: 'Double', type: 'formula', options: { formula: '{Num} * 2' } });
  base.addField('Everything!', { name: 'Shout', type: 'formula', options: { formula: 'UPPER({Name}) & "!"' } });
  const [acme, globex] = base.createRecords('Clients', [
    { Name: 'Acme', Revenue: 1000 },
    { Name: 'Globex', Revenue: 250 },
  ]);
  const [first] = base.createRecords('Everything!', [
    { ...RECORD, ID: 'ext-1', Client: [acme!.id], Clients: [acme!.id, globex!.id], Files: [{ url: 'https://example.com/f/photo.png' }] },
    { Name: 'Empty' },
  ]);
  base.updateRecord('Everything!', first!.id, {
    Go: { label: 'Go', url: 'https://example.com/go' },
    AI: { state: 'generated', isStale: false, value: 'A summary' },
    Future: { anything: [1, 2, 3] },
  });

  const before = new Date();
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  syncId = created.body.id;
  reader = created.body.database.url;
  await waitForCycle(svc, account.token, syncId, before).catch((error: unknown) => {
    process.stderr.write(`${svc.logs.lines.slice(-40).join('\n')}\n`);
    throw error;
  });
});
test.after(async () => svc.stop());

test('tables and columns follow the naming rules', async () => {
  const tables = await query<{ table_name: string }>(reader, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1");
  assert.equal(
    tables.map((t) => t.table_name),
    ['_sync_meta', 'clients', 'everything'],
  );
  const columns = await query<{ column_name: string; data_type: string; udt_name: string }>(
    reader,
    "SELECT column_name, data_type, udt_name FROM information_schema.columns WHERE table_name = 'everything' ORDER BY ordinal_position",
  );
  const types = Object.fromEntries(columns.map((c) => [c.column_name, c.data_type === 'ARRAY' ? `${c.udt_name.slice(1)}[]` : c.data_type]));
  assert.equal(types, {
    id: 'text',
    created_time: 'timestamp with time zone',
    name: 'text',
    id_: 'text',
    email: 'text',
    url: 'text',
    long: 'text',
    phone: 'text',
    num: 'numeric',
    pct: 'numeric',
    money: 'numeric',
    stars: 'numeric',
    auto: 'numeric',
    dur: 'text',
    check: 'boolean',
    day: 'date',
    when: 'timestamp with time zone',
    created: 'timestamp with time zone',
    modified: 'timestamp with time zone',
    status: 'text',
    tags: 'text[]',
    owner: 'text[]',
    creator: 'text',
    editor: 'text',
    team: 'text[]',
    files: 'text[]',
    code: 'numeric',
    go: 'text',
    ai: 'text',
    future: 'jsonb',
    client: 'text',
    clients: 'text[]',
    client_count: 'numeric',
    client_names: 'text[]',
    client_revenue: 'numeric',
    double: 'text',
    shout: 'text',
  });
});

test('every field type lands with the right value', async () => {
  const [row] = await query(reader, "SELECT * FROM everything WHERE name = 'First'");
  const acme = base.records('Clients').find((r) => r.fields.Name === 'Acme')!.id;
  const globex = base.records('Clients').find((r) => r.fields.Name === 'Globex')!.id;
  const upstream = base.records('Everything!').find((r) => r.fields.Name === 'First')!;
  assert.is(row!.id, upstream.id);
  assert.equal(row!.created_time, new Date(upstream.createdTime));
  const expected: Record<string, unknown> = {
    name: 'First',
    id_: 'ext-1',
    email: 'a@example.com',
    url: 'https://example.com',
    long: 'line 1\nline 2',
    phone: '(555) 123-4567',
    num: '21.5',
    pct: '0.5',
    money: '9.99',
    stars: '4',
    auto: '1',
    dur: '1:30:00',
    check: true,
    day: '2022-09-05',
    when: new Date('2022-09-05T10:30:00.000Z'),
    status: 'Todo',
    tags: ['a', 'b'],
    owner: ['kim@example.com'],
    team: ['kim@example.com', 'lee@example.com'],
    code: '12345',
    go: 'https://example.com/go',
    ai: 'A summary',
    future: { anything: [1, 2, 3] },
    client: acme,
    clients: [acme, globex],
    client_count: '2',
    client_names: ['Acme', 'Globex'],
    client_revenue: '1250',
    double: '43',
    shout: 'FIRST!',
  };
  // pg returns date columns as local-midnight Dates; compare the calendar day.
  const day = row!.day as Date;
  row!.day = `${day.getFullYear()}-${String(day.getMonth() + 1).padStart(2, '0')}-${String(day.getDate()).padStart(2, '0')}`;
  for (const [column, value] of Object.entries(expected)) assert.equal(row![column], value, column);
  assert.match(String(row!.creator), /@/);
  assert.match(String((row!.files as string[])[0]), /photo\.png$/);
  assert.instance(row!.modified, Date);

  const [empty] = await query(reader, "SELECT * FROM everything WHERE name = 'Empty'");
  assert.is(empty!.check, false, 'an unchecked box is false, not NULL');
  assert.is(empty!.tags, null);
  assert.is(empty!.client, null);
  assert.is(empty!.email, null);
});

test('COMMENTs record the upstream names and ids', async () => {
  const [table] = await query<{ c: string }>(reader, "SELECT obj_description('public.everything'::regclass) AS c");
  assert.match(table!.c, /^Airtable table "Everything!" \(tbl[A-Za-z0-9]+\)$/);
  const [column] = await query<{ c: string }>(
    reader,
    "SELECT col_description('public.everything'::regclass, ordinal_position::int) AS c FROM information_schema.columns WHERE table_name = 'everything' AND column_name = 'id_'",
  );
  assert.match(column!.c, /^Airtable field "ID" \(fld[A-Za-z0-9]+, singleLineText\)$/);
});

test('_sync_meta and the status show completed cycles', async () => {
  const [meta] = await query<{ started_at: Date; completed_at: Date; duration_last: unknown }>(reader, 'SELECT * FROM _sync_meta');
  assert.instance(meta!.completed_at, Date);
  assert.ok(meta!.duration_last !== null);
  const shown = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.is(shown.body.status.indicator, 'normal');
  assert.type(shown.body.status.lag_seconds, 'number');
  assert.is(shown.body.status.last_error, null);
});

test('creates, updates and deletes upstream reach the database within seconds', async () => {
  const [made] = base.createRecords('Clients', [{ Name: 'Initech', Revenue: 5 }]);
  const created = await waitForRows(reader, `SELECT name FROM clients WHERE id = '${made!.id}'`, (r) => r.length === 1);
  base.updateRecord('Clients', made!.id, { Revenue: 6 });
  const updated = await waitForRows<{ revenue: string }>(reader, `SELECT revenue FROM clients WHERE id = '${made!.id}'`, (r) => r[0]?.revenue === '6');
  base.deleteRecords('Clients', [made!.id]);
  const deleted = await waitForRows(reader, `SELECT 1 FROM clients WHERE id = '${made!.id}'`, (r) => r.length === 0);
  for (const [what, took] of [
    ['create', created.ms],
    ['update', updated.ms],
    ['delete', deleted.ms],
  ] as const) {
    assert.ok(took < 5000, `${what} took ${took} ms`);
  }
});

test('a computed field follows the edit it depends on', async () => {
  const first = base.records('Everything!').find((r) => r.fields.Name === 'First')!;
  base.updateRecord('Everything!', first.id, { Num: 50 });
  await waitForRows<{ double: string }>(reader, `SELECT double FROM everything WHERE id = '${first.id}'`, (r) => r[0]?.double === '100');
});

test('renaming a field and adding a table appear after the next cycle, with no reader error meanwhile', async () => {
  let stop = false;
  let reads = 0;
  const errors: string[] = [];
  const readerLoop = (async () => {
    while (!stop) {
      const error = await errorOf(reader, 'SELECT * FROM everything', 'SELECT * FROM clients');
      if (error) errors.push(error.message);
      reads++;
    }
  })();
  base.renameField('Everything!', 'Phone', 'Mobile Phone');
  base.createTable('Invoices 🧾', [{ name: 'Number', type: 'singleLineText' }]);
  base.createRecords('Invoices 🧾', [{ Number: 'INV-1' }]);
  const after = new Date();
  await waitForCycle(svc, account.token, syncId, after);
  stop = true;
  await readerLoop;
  assert.equal(errors, [], 'readers never saw a missing or half-built table');
  assert.ok(reads > 10, `the reader ran throughout (${reads} reads)`);
  const [row] = await query(reader, "SELECT mobile_phone FROM everything WHERE name = 'First'");
  assert.is(row!.mobile_phone, '(555) 123-4567');
  assert.equal(await query(reader, 'SELECT number FROM invoices'), [{ number: 'INV-1' }]);
});

test('changing intelligent_cast and lookup_as rebuilds the columns', async () => {
  const patched = await request(svc.api, 'PATCH', `/api/syncs/${syncId}`, {
    token: account.token,
    body: { settings: { intelligent_cast: false, lookup_as: 'text' } },
  });
  assert.is(patched.status, 200);
  await waitForCycle(svc, account.token, syncId, new Date());
  const [row] = await query(reader, "SELECT client, client_names FROM everything WHERE name = 'First'");
  assert.is((row!.client as string[]).length, 1, 'a single link is text[] with intelligent cast off');
  assert.is(row!.client_names, 'Acme, Globex');
});

test('the sync never provoked a 429', () => {
  assert.ok(svc.airtable.stats.byBase(base.id).requests > 20);
  assert.is(svc.airtable.stats.byBase(base.id).rateLimited, 0);
});

test('a revoked key turns the status red with a clear error and deletes nothing', async () => {
  const countBefore = await query(reader, 'SELECT count(*)::int AS n FROM everything');
  svc.airtable.revokeToken(AIRTABLE_TEST_TOKEN);
  try {
    const status = await waitForRows(reader, 'SELECT 1', () => true).then(async () => {
      for (let i = 0; i < 100; i++) {
        const shown = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
        if (shown.body.status.indicator === 'red') return shown.body.status;
        await new Promise((r) => setTimeout(r, 200));
      }
      return undefined;
    });
    assert.ok(status, 'the indicator turned red');
    assert.match(status.last_error, /Airtable key was rejected/);
    assert.equal(await query(reader, 'SELECT count(*)::int AS n FROM everything'), countBefore);
  } finally {
    svc.airtable.addToken(AIRTABLE_TEST_TOKEN, { bases: '*' });
  }
});

test('deleting the sync removes its webhook upstream', async () => {
  const hooks = async () =>
    (await (await fetch(`${svc.airtable.url}/v0/bases/${base.id}/webhooks`, { headers: { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}` } })).json()) as {
      webhooks: unknown[];
    };
  assert.is((await hooks()).webhooks.length, 1);
  const deleted = await request(svc.api, 'DELETE', `/api/syncs/${syncId}`, { token: account.token });
  assert.is(deleted.status, 200);
  assert.is((await hooks()).webhooks.length, 0);
});

test.run();
