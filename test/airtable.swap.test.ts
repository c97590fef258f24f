/**
 * A rebuilt table going in (swap.ts) while proxied writes still reach the old one, on a real
 * sync database: the guarded swap neither deadlocks with a proxied write that starts on a
 * fresh connection during it, nor goes in while a record written meanwhile is not yet fetched
 * again into the new table.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mapBase, type TableMapping } from '../src/airtable/schema.ts';
import { prepareRebuild, swapIn } from '../src/writer/swap.ts';
import { builtTable, shapeOf } from '../src/airtable/tables.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { AIRTABLE_DEFAULT_SETTINGS } from '../src/airtable/settings.ts';
import { withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { upsertRows } from '../src/writer/upsert.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { fileLogger } from './harness/test-log.ts';

/** Enough rows that comparing the old and the new table takes a while. */
const ROWS = 300_000;
let url: string;
let db: pg.Pool;
let mapping: TableMapping;

test.before(async () => {
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'unused-password', fileLogger());
  url = withDatabase(serverAdminUrl(), name);
  db = new pg.Pool({ connectionString: url, max: 4 });
  [mapping] = mapBase(
    [
      {
        id: 'tblTasksTasksTas',
        name: 'Tasks',
        primaryFieldId: 'fldLabelLabelLab',
        fields: [{ id: 'fldLabelLabelLab', name: 'Label', type: 'singleLineText' }],
      },
    ],
    AIRTABLE_DEFAULT_SETTINGS,
  ) as [TableMapping];
  await prepareRebuild(db, builtTable(mapping, PUBLIC_SCHEMAS));
  await swapIn(db, builtTable(mapping, PUBLIC_SCHEMAS));
});
test.after(async () => db?.end());

/** The live table with ROWS rows, and a rebuilt copy of it in public_swap with other labels. */
async function rebuiltCopy(label: string): Promise<void> {
  await db.query(`TRUNCATE public.tasks`);
  await db.query(`INSERT INTO public.tasks (id, label) SELECT 'rec' || g, 'old ' || g FROM generate_series(1, ${ROWS}) g`);
  await prepareRebuild(db, builtTable(mapping, PUBLIC_SCHEMAS));
  await db.query(`INSERT INTO public_swap.tasks (id, label) SELECT 'rec' || g, '${label} ' || g FROM generate_series(1, ${ROWS}) g`);
}

/** A proxied write as the proxy makes it: marked, and the first statement on its connection. */
async function proxiedWrite(id: string, label: string): Promise<void> {
  const fresh = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await upsertRows(fresh, shapeOf(mapping, 'public'), [{ id, label }], { mark: { table: mapping.tableId, at: Date.now() } });
  } finally {
    await fresh.end();
  }
}

test('a proxied write on a fresh connection during a guarded swap: both finish, no deadlock', async () => {
  await rebuiltCopy('new');
  const since = Date.now();
  const swap = swapIn(db, builtTable(mapping, PUBLIC_SCHEMAS), { since, covered: () => true });
  await new Promise((r) => setTimeout(r, 150)); // the swap is comparing the tables
  const write = proxiedWrite('rec1', 'proxied');
  const [swapped] = await Promise.all([swap, write]);
  assert.equal(swapped, [], 'swapped');
  const { rows } = await db.query("SELECT label FROM public.tasks WHERE id = 'rec2'");
  assert.is(rows[0].label, 'new 2', 'the rebuilt table is in');
});

test('a write to the old table while the swap compares the tables commits after the swap, into the new table', async () => {
  // Committed between the comparison and the swap, it would be an event before the swap's,
  // whose differences (computed before it) then carry an older prior than it wrote.
  await rebuiltCopy('new');
  const swap = swapIn(db, builtTable(mapping, PUBLIC_SCHEMAS));
  await new Promise((r) => setTimeout(r, 150)); // the swap is comparing the tables
  const fresh = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const write = fresh.query("UPDATE public.tasks SET label = 'written during the swap' WHERE id = 'rec1'");
    const [swapped] = await Promise.all([swap, write]);
    assert.equal(swapped, []);
  } finally {
    await fresh.end();
  }
  const { rows } = await db.query("SELECT id, label FROM public.tasks WHERE id IN ('rec1', 'rec2') ORDER BY id");
  assert.equal(
    rows.map((r) => r.label),
    ['written during the swap', 'new 2'],
    'the write went into the new table, after the swap',
  );
});

test('a record written meanwhile and not fetched again holds the swap back; the old table stays', async () => {
  await rebuiltCopy('newer');
  const since = Date.now();
  await proxiedWrite('rec7', 'proxied');
  const held = await swapIn(db, builtTable(mapping, PUBLIC_SCHEMAS), { since, covered: () => false });
  assert.equal(
    held.map((m) => m.id),
    ['rec7'],
  );
  const { rows } = await db.query("SELECT label FROM public.tasks WHERE id IN ('rec7', 'rec8') ORDER BY id");
  assert.equal(
    rows.map((r) => r.label),
    ['proxied', 'old 8'],
    'nothing swapped',
  );
  // Fetched again into the new table: now it goes in.
  await db.query("UPDATE public_swap.tasks SET label = 'proxied' WHERE id = 'rec7'");
  assert.equal(await swapIn(db, builtTable(mapping, PUBLIC_SCHEMAS), { since, covered: () => true }), []);
  const after = await db.query("SELECT label FROM public.tasks WHERE id IN ('rec7', 'rec8') ORDER BY id");
  assert.equal(
    after.rows.map((r) => r.label),
    ['proxied', 'newer 8'],
  );
});

test.run();
