/**
 * The simulation's Airtable UI traffic (sim/traffic/airtable.ts) against the fake: every actor
 * acts, every kind of field change happens, a reserved table is left alone, the actors stop soon
 * after the abort, and the base is still listable over REST afterwards.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type FakeAirtable, type FakeBase, type RecordJson, type TableJson, startFakeAirtable } from '../fakes/airtable/index.ts';
import { Random } from '../sim/random.ts';
import { airtableUsers } from '../sim/traffic/airtable.ts';
import type { TrafficActor } from '../sim/types.ts';

const TOKEN = 'patSIMtraffic00001.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const RESERVED = 'Clients';
const RUN_MS = 8000;

let fake: FakeAirtable;
let base: FakeBase;

test.before(async () => {
  fake = await startFakeAirtable({ rateLimit: false });
  base = fake.createBase({ name: 'Traffic' });
  fake.addToken(TOKEN, { bases: [base.id] });
  // Clients is in the link ring (Projects → Tasks → Clients → Projects), so the generator has to
  // keep off it through links too.
  base.generate({
    seed: 20240601,
    tables: [
      { name: 'Projects', records: 50 },
      { name: 'Tasks', records: 60 },
      { name: RESERVED, records: 40 },
    ],
  });
});

test.after(async () => {
  await fake.close();
});

/** What API clients own in the reserved table: its schema, and its records' stored cells. */
function reservedState(): { table: TableJson; records: RecordJson[] } {
  const table = base.table(RESERVED);
  const computed = new Set(table.fields.filter((f) => ['multipleLookupValues', 'rollup', 'count'].includes(f.type)).map((f) => f.name));
  const records = base.records(RESERVED).map((r) => {
    const fields = Object.fromEntries(Object.entries(r.fields).filter(([name]) => !computed.has(name) && name !== 'Files'));
    return { ...r, fields };
  });
  return { table, records };
}

async function listAll(tableId: string): Promise<number> {
  let offset: string | undefined;
  let count = 0;
  do {
    const url = new URL(`${fake.url}/v0/${base.id}/${tableId}`);
    if (offset) url.searchParams.set('offset', offset);
    const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    const body = (await res.json()) as { records?: unknown[]; offset?: string; error?: unknown };
    assert.is(res.status, 200, `listing ${tableId}: ${JSON.stringify(body.error)}`);
    count += body.records?.length ?? 0;
    offset = body.offset;
  } while (offset);
  return count;
}

test('several UI users edit the base at once; a reserved table is left alone', async () => {
  const before = reservedState();
  const lines: string[] = [];
  const actors: TrafficActor[] = airtableUsers({ base, random: new Random(7), log: (m) => lines.push(m), reserved: [RESERVED], schemaRate: 25 });
  assert.ok(actors.length >= 4);
  assert.is(new Set(actors.map((a) => a.name)).size, actors.length);

  const abort = new AbortController();
  const started = Date.now();
  const runs = actors.map((a) => a.run(abort.signal));
  await new Promise((resolve) => setTimeout(resolve, RUN_MS));
  abort.abort();
  const stopping = Date.now();
  await Promise.all(runs);
  const stopMs = Date.now() - stopping;
  assert.ok(stopMs < 1000, `actors took ${stopMs} ms to stop`);

  const report = actors.map(
    (a) => `${a.name}: ok ${JSON.stringify(Object.fromEntries(a.counts.done))} no ${JSON.stringify(Object.fromEntries(a.counts.refused))}`,
  );
  console.log(`  ${((Date.now() - started) / 1000).toFixed(1)} s\n  ${report.join('\n  ')}\n  ${lines.join('\n  ')}`);

  // No refusal a wrong value would explain (only ones the moment's state explains).
  const unexpected = lines.filter((l) => l.includes('unexpected'));
  assert.equal(unexpected, []);

  for (const actor of actors) assert.ok(actor.counts.total > 0, `${actor.name} did nothing`);
  const byName = (name: string) => actors.find((a) => a.name.endsWith(name)) as TrafficActor;
  const done = (name: string, kind: string) => byName(name).counts.done.get(kind) ?? 0;

  // The typist: a keystroke every 100 ms while typing.
  assert.ok(done('typist', 'record.update') >= 30, `typist: ${done('typist', 'record.update')} keystrokes`);
  // The bulk editor: creates, deletes and single updates; realistic speed, not a tight loop.
  assert.ok(done('bulk-editor', 'record.update') >= 5);
  assert.ok(done('bulk-editor', 'records.create') + done('bulk-editor', 'records.delete') >= 1);
  const bulkOps = byName('bulk-editor').counts.total;
  assert.ok(bulkOps < (RUN_MS / 1000) * 5, `bulk editor: ${bulkOps} operations in ${RUN_MS} ms`);
  // The linker: links added and removed.
  assert.ok(done('linker', 'link.add') + done('linker', 'link.remove') + done('linker', 'link.replace') >= 5);
  // The schema editor: each kind of field change at least once.
  for (const kind of ['field.add', 'field.rename', 'field.retype', 'field.delete']) assert.ok(done('schema-editor', kind) >= 1, `no ${kind}`);
  const tableChanges = done('schema-editor', 'table.create') + done('schema-editor', 'table.rename') + done('schema-editor', 'table.delete');
  assert.ok(tableChanges >= 1, 'no table change');

  // The reserved table: same schema, same stored cells (only lookups over other tables may move).
  const after = reservedState();
  assert.equal(after.table, before.table);
  assert.equal(after.records, before.records);

  // Bounded, and still listable over REST, table by table.
  const tables = base.tables();
  assert.ok(tables.length >= 2 && tables.length <= 8, `${tables.length} tables`);
  assert.ok(tables.some((t) => t.name === RESERVED));
  for (const table of tables) {
    assert.ok(table.fields.length <= 45, `${table.name}: ${table.fields.length} fields`);
    assert.is(await listAll(table.id), base.recordCount(table.id), `listing ${table.name}`);
  }
});

test('the control API lists tables and changes field types as the UI does', () => {
  const b = fake.createBase({ name: 'Retype' });
  b.createTable('T', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Qty', type: 'singleLineText' },
    { name: 'Level', type: 'singleLineText' },
    { name: 'Price', type: 'currency' },
    { name: 'Tags', type: 'singleSelect', options: { choices: [{ name: 'a' }, { name: 'b' }] } },
  ]);
  b.createTable('U', [{ name: 'Name', type: 'singleLineText' }]);
  assert.equal(
    b.tables().map((t) => t.name),
    ['T', 'U'],
  );
  const [r1, r2] = b.createRecords('T', [
    { Name: 'one', Qty: '12', Level: 'high', Price: 9.5, Tags: 'a' },
    { Name: 'two', Qty: 'lots', Level: 'low', Price: 3, Tags: 'b' },
  ]) as [RecordJson, RecordJson];
  b.retypeField('T', 'Qty', 'number');
  const level = b.retypeField('T', 'Level', 'singleSelect');
  b.retypeField('T', 'Price', 'singleLineText');
  const tags = b.retypeField('T', 'Tags', 'multipleSelects');
  assert.equal((level.options!.choices as Array<{ name: string }>).map((c) => c.name).sort(), ['high', 'low']);
  assert.equal(
    (tags.options!.choices as Array<{ name: string }>).map((c) => c.name),
    ['a', 'b'],
  );
  const rows = new Map(b.records('T').map((r) => [r.id, r.fields]));
  assert.equal(rows.get(r1.id), { Name: 'one', Qty: 12, Level: 'high', Price: '9.5', Tags: ['a'] });
  // What does not convert is cleared.
  assert.equal(rows.get(r2.id), { Name: 'two', Level: 'low', Price: '3', Tags: ['b'] });
  assert.is(b.table('T').fields.find((f) => f.name === 'Qty')?.type, 'number');
  assert.throws(() => b.retypeField('T', 'Name', 'checkbox'), /primary/);
  // A generated table's untouched rows convert too.
  const g = fake.createBase({ name: 'Generated' });
  g.generate({ seed: 5, tables: [{ name: 'G', records: 20 }] });
  const amounts = g.records('G').map((r) => r.fields.Amount);
  g.retypeField('G', 'Amount', 'singleLineText');
  assert.equal(
    g.records('G').map((r) => r.fields.Amount),
    amounts.map((a) => (a === undefined ? undefined : String(a))),
  );
});

test.run();
