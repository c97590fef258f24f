/**
 * The WAL decoder on a real sync database and a real control database: the event shapes
 * documented in the README for every column type Tributary makes, what is no event, unchanged TOASTed
 * values, and a restart that neither loses nor repeats anything.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountStore } from '../src/control/accounts.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { withDatabase } from '../src/db/sql.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { Decoder } from '../src/decoder/stream.ts';
import { waitForDecoder } from '../src/decoder/wait.ts';
import { EventBus } from '../src/events/bus.ts';
import { newDatabaseName } from '../src/ids.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import type { ColumnMapping, TableMapping } from '../src/airtable/schema.ts';
import { prepareRebuild, swapIn } from '../src/writer/swap.ts';
import { builtTable } from '../src/airtable/tables.ts';
import { freshDatabase, serverAdminUrl } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
const SYNC = 'sy_decodertest';
let control: pg.Pool;
let target: pg.Pool;
let targetUrl: string;
let slot: string;
let accountId: string;
let decoder: Decoder | undefined;

const shape = {
  schema: 'public',
  name: 'items',
  key: 'id',
  columns: [
    { name: 'id', type: 'text' },
    { name: 'name', type: 'text' },
    { name: 'price', type: 'numeric' },
    { name: 'count', type: 'bigint' },
    { name: 'rank', type: 'integer' },
    { name: 'score', type: 'double precision' },
    { name: 'done', type: 'boolean' },
    { name: 'due', type: 'date' },
    { name: 'at', type: 'timestamptz' },
    { name: 'tags', type: 'text[]' },
    { name: 'amounts', type: 'numeric[]' },
    { name: 'meta', type: 'jsonb' },
  ],
};

test.before(async () => {
  try {
    await setUp();
  } catch (error) {
    console.error('set-up failed:', error); // uvu hides errors thrown by hooks
    throw error;
  }
});

async function setUp(): Promise<void> {
  const controlUrl = await freshDatabase('ctl');
  await migrateControlDatabase(controlUrl, logger);
  control = new pg.Pool({ connectionString: controlUrl });
  const accounts = new AccountStore(control, SecretBox.fromBase64(randomBytes(32).toString('base64')));
  accountId = (await accounts.create('decoder')).account.id;
  slot = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name: slot, role: `${slot}_ro` }, 'decoder-test-password', logger);
  targetUrl = withDatabase(serverAdminUrl(), slot);
  target = new pg.Pool({ connectionString: targetUrl });
  for (const statement of createTableStatements(shape)) await target.query(statement);
}

test.after(async () => {
  await decoder?.stop();
  await target?.end();
  await control?.end();
});

function startDecoder(): Decoder {
  decoder = new Decoder({
    syncId: SYNC,
    accountId,
    databaseUrl: targetUrl,
    slot,
    control,
    rules: { collectionOf: (t) => (t.startsWith('_') ? undefined : t), keyOf: () => 'id' },
    logger,
    flushMs: 2,
    retryMs: 100,
  });
  decoder.start();
  return decoder;
}

type Event = {
  collection: string;
  created_at: string;
  data: Record<string, unknown>;
  event: string;
  id: string;
  table_db_name: string;
  changes?: Record<string, unknown>;
};

/** Waits until the log holds `count` events of this sync, then returns them in order. */
async function loggedEvents(count: number, timeoutMs = 10_000): Promise<Array<{ key: string; seq: string; event: Event; raw: string }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await control.query<{ event_key: string; seq: string; value: string }>(
      'SELECT event_key, seq, value FROM events WHERE sync_id = $1 ORDER BY seq',
      [SYNC],
    );
    if (rows.length >= count || Date.now() > deadline) {
      return rows.map((r) => ({ key: r.event_key, seq: r.seq, event: JSON.parse(r.value) as Event, raw: r.value }));
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The slot's confirmed position has passed every change made so far. */
async function caughtUp(): Promise<void> {
  const { rows } = await target.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  const goal = rows[0]!.lsn;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows: slotRows } = await target.query<{ ok: boolean }>(
      'SELECT confirmed_flush_lsn >= $2::pg_lsn AS ok FROM pg_replication_slots WHERE slot_name = $1',
      [slot, goal],
    );
    if (slotRows[0]?.ok) return;
    if (Date.now() > deadline) throw new Error(`slot did not pass ${goal}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const fullRow = {
  id: 'rec1',
  name: 'Widget "one"',
  price: 12.5,
  count: 9007199254740991,
  rank: 3,
  score: 0.25,
  done: true,
  due: '2024-02-29',
  at: '2024-05-01T12:00:00.500Z',
  tags: ['red', 'big blue', 'with,comma', 'quote"d', null],
  amounts: [1.5, 2],
  meta: { nested: { a: [1, 'x'] }, flag: false },
};

test('an insert carries every column under its database name, as natural JSON', async () => {
  startDecoder();
  await target.query(
    `INSERT INTO items VALUES ('rec1', 'Widget "one"', 12.50, 9007199254740991, 3, 0.25, true, '2024-02-29',
       '2024-05-01 12:00:00.5+00', ARRAY['red', 'big blue', 'with,comma', 'quote"d', NULL], ARRAY[1.5, 2.0],
       '{"nested": {"a": [1, "x"]}, "flag": false}')`,
  );
  await target.query(`INSERT INTO items (id) VALUES ('rec2')`);
  const events = await loggedEvents(2);
  assert.equal(events.length, 2);
  const first = events[0]!.event;
  assert.equal(Object.keys(first), ['collection', 'created_at', 'data', 'event', 'id', 'table_db_name']);
  assert.equal(first.collection, 'items');
  assert.equal(first.table_db_name, 'items');
  assert.equal(first.event, 'inserted');
  assert.equal(first.id, 'rec1');
  assert.ok(Math.abs(Date.parse(first.created_at) - Date.now()) < 60_000, 'created_at is now');
  assert.equal(first.data, fullRow);
  assert.equal(
    Object.keys(first.data),
    shape.columns.map((c) => c.name),
    'columns in table order',
  );
  const second = events[1]!.event;
  assert.equal(second.data, {
    id: 'rec2',
    name: null,
    price: null,
    count: null,
    rank: null,
    score: null,
    done: null,
    due: null,
    at: null,
    tags: null,
    amounts: null,
    meta: null,
  });
  assert.is(events[0]!.key === events[1]!.key, false, 'every event has its own idempotency key');
});

test('an update lists prior values of the changed columns only, NULLs and arrays and jsonb included', async () => {
  await target.query(`UPDATE items SET tags = ARRAY['red'], meta = '{"flag": true}', name = NULL, price = 13 WHERE id = 'rec1'`);
  const events = await loggedEvents(3);
  const update = events[2]!.event;
  assert.equal(update.event, 'updated');
  assert.equal(update.changes, { name: 'Widget "one"', price: 12.5, tags: fullRow.tags, meta: fullRow.meta });
  assert.equal(update.data, { ...fullRow, name: null, price: 13, tags: ['red'], meta: { flag: true } });
  assert.equal(Object.keys(update), ['collection', 'created_at', 'data', 'event', 'id', 'table_db_name', 'changes']);
});

test('an update that changes nothing, and changes to _sync_meta, are no events', async () => {
  await target.query(`UPDATE items SET name = name, price = 13.0 WHERE id = 'rec1'`);
  await target.query('UPDATE public._sync_meta SET started_at = now(), completed_at = now()');
  await target.query(`UPDATE items SET rank = 4 WHERE id = 'rec2'`);
  const events = await loggedEvents(4);
  assert.equal(events.length, 4, 'only the real change');
  assert.equal(events[3]!.event.changes, { rank: null });
  await caughtUp();
  assert.equal((await loggedEvents(4)).length, 4);
});

test('a delete carries the whole deleted row', async () => {
  await target.query(`DELETE FROM items WHERE id = 'rec1'`);
  const events = await loggedEvents(5);
  const deletion = events[4]!.event;
  assert.equal(deletion.event, 'deleted');
  assert.equal(deletion.id, 'rec1');
  assert.equal(deletion.data, { ...fullRow, name: null, price: 13, tags: ['red'], meta: { flag: true } });
  assert.is(deletion.changes, undefined);
});

test('an unchanged TOASTed value is still in the data of an update, and not in its changes', async () => {
  const big = { blob: randomBytes(200_000).toString('base64') };
  await target.query(`INSERT INTO items (id, meta, name) VALUES ('rec3', $1, 'before')`, [big]);
  await target.query(`UPDATE items SET name = 'after' WHERE id = 'rec3'`);
  const events = await loggedEvents(7);
  const update = events[6]!.event;
  assert.equal(update.changes, { name: 'before' });
  assert.equal(update.data.meta, big);
});

test('a restart resumes from the slot: changes made while stopped arrive, nothing logged twice', async () => {
  await caughtUp();
  await decoder!.stop();
  await target.query(`INSERT INTO items (id, rank) SELECT 'bulk' || g, g FROM generate_series(1, 500) g`);
  await target.query(`UPDATE items SET rank = rank + 1 WHERE id LIKE 'bulk%'`);
  startDecoder();
  const events = await loggedEvents(7 + 1000);
  assert.equal(events.length, 1007);
  assert.equal(new Set(events.map((e) => e.key)).size, 1007, 'no idempotency key twice');
  assert.equal(
    events.map((e) => e.seq),
    events.map((_, i) => String(i + 1)),
    'seq has no gaps',
  );
  const bulk = events.slice(7);
  assert.equal(bulk.filter((e) => e.event.event === 'inserted').length, 500);
  assert.equal(bulk[500]!.event.changes, { rank: 1 });
  assert.equal(bulk[500]!.event.data.rank, 2);
});

const swapColumn = (name: string, type: ColumnMapping['type']): ColumnMapping => ({
  fieldId: name === 'id' ? null : `fld${name}`,
  upstreamName: name,
  upstreamType: 'singleLineText',
  name,
  type,
  converter: 'text' as ColumnMapping['converter'],
});

/** Builds `mapping` in public_swap with `values` and swaps it in; returns the events the swap made. */
async function rebuild(mapping: TableMapping, values: string): Promise<Event[]> {
  await caughtUp();
  const before = (await loggedEvents(0)).length;
  await prepareRebuild(target, builtTable(mapping, PUBLIC_SCHEMAS));
  if (values) await target.query(`INSERT INTO public_swap.${mapping.name} VALUES ${values}`);
  await swapIn(target, builtTable(mapping, PUBLIC_SCHEMAS));
  await caughtUp();
  return (await loggedEvents(before)).slice(before).map((e) => e.event);
}

test("a swapped-in table: its first build is inserts, a rebuild gives the rows that differ, an added column's values included", async () => {
  const v1: TableMapping = {
    tableId: 'tblSwap',
    upstreamName: 'Swap',
    name: 'swapped',
    columns: [swapColumn('id', 'text'), swapColumn('name', 'text'), swapColumn('points', 'numeric')],
  };
  const first = await rebuild(v1, `('recA', 'a', 1), ('recB', 'b', 2), ('recC', 'c', 3), ('recE', 'e', 5)`);
  assert.equal(
    first.map((e) => [e.event, e.id, e.data]),
    [
      ['inserted', 'recA', { id: 'recA', name: 'a', points: 1 }],
      ['inserted', 'recB', { id: 'recB', name: 'b', points: 2 }],
      ['inserted', 'recC', { id: 'recC', name: 'c', points: 3 }],
      ['inserted', 'recE', { id: 'recE', name: 'e', points: 5 }],
    ],
  );

  const v2: TableMapping = { ...v1, columns: [...v1.columns, swapColumn('notes', 'text')] };
  // recA unchanged but for a value in the new column, recB changed, recC gone, recD new,
  // recE unchanged and null in the new column.
  const second = await rebuild(v2, `('recA', 'a', 1, 'new column'), ('recB', 'B', 2, NULL), ('recD', 'd', 4, NULL), ('recE', 'e', 5, NULL)`);
  const byId = Object.fromEntries(second.map((e) => [e.id, e]));
  assert.equal(second.length, 4, JSON.stringify(second));
  assert.equal(byId.recA!.event, 'updated');
  assert.equal(byId.recA!.changes, { notes: null }, 'the new column named, its prior value null');
  assert.equal(byId.recA!.data, { id: 'recA', name: 'a', points: 1, notes: 'new column' });
  assert.equal(byId.recB!.event, 'updated');
  assert.equal(byId.recB!.changes, { name: 'b' }, 'a null in the new column is no change');
  assert.equal(byId.recB!.data, { id: 'recB', name: 'B', points: 2, notes: null });
  assert.equal(byId.recC!.event, 'deleted');
  assert.equal(byId.recC!.data, { id: 'recC', name: 'c', points: 3 });
  assert.equal(byId.recD!.event, 'inserted');
  assert.equal(byId.recD!.table_db_name, 'swapped');
  assert.is(byId.recE, undefined, 'a row with nothing but a null in the new column makes no event');
});

test('a rebuild that removes, renames or retypes a column: each row whose value changed is an update', async () => {
  const base: TableMapping = {
    tableId: 'tblShift',
    upstreamName: 'Shift',
    name: 'shifted',
    columns: [swapColumn('id', 'text'), swapColumn('label', 'text'), swapColumn('gone', 'text'), swapColumn('old_name', 'text'), swapColumn('qty', 'text')],
  };
  await rebuild(base, `('recA', 'a', 'bye', 'kept', '13'), ('recB', 'b', NULL, NULL, NULL), ('recC', 'c', NULL, 'x', 'n/a')`);
  // `gone` removed, `old_name` renamed to `new_name`, `qty` retyped text → numeric.
  const next: TableMapping = {
    ...base,
    columns: [swapColumn('id', 'text'), swapColumn('label', 'text'), swapColumn('new_name', 'text'), swapColumn('qty', 'numeric')],
  };
  const events = await rebuild(next, `('recA', 'a', 'kept', 13), ('recB', 'b', NULL, NULL), ('recC', 'c', 'x', NULL)`);
  const byId = Object.fromEntries(events.map((e) => [e.id, e]));
  assert.equal(events.length, 2, JSON.stringify(events));
  // recA: a value in the removed column, a renamed value, "13" now the number 13.
  assert.equal(byId.recA!.event, 'updated');
  assert.equal(byId.recA!.data, { id: 'recA', label: 'a', new_name: 'kept', qty: 13 });
  assert.equal(byId.recA!.changes, { new_name: null, qty: '13', gone: 'bye', old_name: 'kept' });
  // recB held only nulls in the changed columns: no event.
  assert.is(byId.recB, undefined);
  // recC: a renamed value; a text that is no number is now null.
  assert.equal(byId.recC!.data, { id: 'recC', label: 'c', new_name: 'x', qty: null });
  assert.equal(byId.recC!.changes, { new_name: null, qty: 'n/a', old_name: 'x' });
});

test('a retype that keeps every value as JSON makes no event', async () => {
  const v1: TableMapping = { tableId: 'tblSame', upstreamName: 'Same', name: 'same_values', columns: [swapColumn('id', 'text'), swapColumn('v', 'text')] };
  await rebuild(v1, `('recA', 'abc'), ('recB', NULL)`);
  const events = await rebuild({ ...v1, columns: [swapColumn('id', 'text'), swapColumn('v', 'jsonb')] }, `('recA', '"abc"'), ('recB', NULL)`);
  assert.equal(events, [], 'text abc and the JSON string "abc" are the same JSON value');
});

test('a wait returns once every change committed before it is in the log; with no decoder it times out', async () => {
  const bus = new EventBus({ url: control.options.connectionString as string, logger });
  await bus.start();
  try {
    await target.query(`INSERT INTO items (id) SELECT 'wait' || g FROM generate_series(1, 300) g`);
    const answer = await waitForDecoder({ databaseUrl: targetUrl, bus, control, timeoutMs: 10_000 });
    assert.ok(answer, 'the decoder reached the marker');
    assert.match(answer.lsn, /^[0-9A-F]+\/[0-9A-F]+$/);
    const { rows } = await control.query<{ n: string }>("SELECT count(*) AS n FROM events WHERE sync_id = $1 AND record_id LIKE 'wait%'", [SYNC]);
    assert.is(rows[0]!.n, '300', 'all 300 changes were durable when the wait returned');

    await decoder!.stop();
    const started = Date.now();
    assert.is(await waitForDecoder({ databaseUrl: targetUrl, bus, control, timeoutMs: 500 }), undefined);
    assert.ok(Date.now() - started >= 450, 'it waited the timeout');
    startDecoder();
  } finally {
    await bus.stop();
  }
});

test('a wait whose marker is reached while its process is not listening still returns', async () => {
  // The bus comes back 3 s after its LISTEN connection is lost; the marker is reached well
  // before, so its NOTIFY reaches no one. The waiter must find the marker some other way.
  const bus = new EventBus({ url: control.options.connectionString as string, logger, reconnectMs: 3000 });
  await bus.start();
  try {
    await caughtUp();
    const { rows } = await control.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() AND datname = current_database()",
    );
    assert.ok(rows.length > 0, 'the bus listens');
    await control.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid', [rows.map((r) => r.pid)]);
    await new Promise((r) => setTimeout(r, 200));
    await target.query(`INSERT INTO items (id) VALUES ('unheard')`);
    const started = Date.now();
    const answer = await waitForDecoder({ databaseUrl: targetUrl, bus, control, timeoutMs: 10_000 });
    assert.ok(answer, 'the wait found its marker reached');
    assert.ok(Date.now() - started < 2500, `answered before the bus came back (${Date.now() - started} ms)`);
  } finally {
    await bus.stop();
  }
});

test.run();
