/**
 * Rows fetched upstream (a sweep's page, a change-capture refetch) against a proxied write
 * that may be newer, on a real PostgreSQL: a marked record whose fetched copy differs is held
 * back and named for fetching again; one whose copy equals the table's, or one fetched a clock
 * margin after the mark, is not held.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { writeFetched } from '../src/writer/fetched.ts';
import { CORE } from '../src/syncdb/core.ts';
import { migrateSyncDatabase } from '../src/syncdb/migrate.ts';
import { MARK_CLOCK_MARGIN_MS } from '../src/writer/marks.ts';
import { createTableStatements, type TableShape } from '../src/writer/shape.ts';
import { upsertRows } from '../src/writer/upsert.ts';
import { freshDatabase, query } from './harness/postgres.ts';

const shape: TableShape = {
  schema: 'public',
  name: 'tasks',
  key: 'id',
  columns: [
    { name: 'id', type: 'text' },
    { name: 'count', type: 'bigint' },
  ],
};
let url: string;
let pool: pg.Pool;

test.before(async () => {
  url = await freshDatabase('fetched');
  pool = new pg.Pool({ connectionString: url, max: 2 });
  await pool.query('CREATE SCHEMA public_swap');
  await migrateSyncDatabase(pool, [CORE], PUBLIC_SCHEMAS);
  for (const statement of createTableStatements(shape)) await pool.query(statement);
});
test.after(async () => pool?.end());

const counts = async () =>
  Object.fromEntries((await query<{ id: string; count: string }>(url, 'SELECT id, count FROM tasks ORDER BY id')).map((r) => [r.id, Number(r.count)]));

async function write(rows: Array<{ id: string; count: number }>, fetchedAt: number) {
  const client = await pool.connect();
  try {
    return await writeFetched(client, shape, 'tblTasks', rows, fetchedAt);
  } finally {
    client.release();
  }
}

test('a fetched copy older than a proxied write is held back and named; unmarked and equal rows are written or skipped', async () => {
  await write(
    [
      { id: 'recA', count: 1 },
      { id: 'recB', count: 1 },
      { id: 'recC', count: 1 },
    ],
    Date.now(),
  );
  const proxiedAt = Date.now();
  // The proxy's writes: recA to 2, recC to 5, each marked in the same statement.
  await upsertRows(
    pool,
    shape,
    [
      { id: 'recA', count: 2 },
      { id: 'recC', count: 5 },
    ],
    { mark: { table: 'tblTasks', at: proxiedAt } },
  );

  // Fetched just before those writes: recA's copy is older (1), recC's already equals the
  // proxy's (5), recB is unmarked and changed upstream (7), recD is new.
  const result = await write(
    [
      { id: 'recA', count: 1 },
      { id: 'recB', count: 7 },
      { id: 'recC', count: 5 },
      { id: 'recD', count: 4 },
    ],
    proxiedAt - 50,
  );
  assert.equal(result.held, ['recA']);
  assert.is(result.written, 2);
  assert.equal(await counts(), { recA: 2, recB: 7, recC: 5, recD: 4 });
});

test('a fetch begun a clock margin after the mark is written, whatever it says', async () => {
  const proxiedAt = Date.now() - MARK_CLOCK_MARGIN_MS - 1000;
  await upsertRows(pool, shape, [{ id: 'recE', count: 1 }], { mark: { table: 'tblTasks', at: proxiedAt } });
  const result = await write([{ id: 'recE', count: 9 }], Date.now());
  assert.equal(result.held, []);
  assert.is(result.written, 1);
  assert.is((await counts()).recE, 9);
});

test('marks of another upstream table do not hold a row back', async () => {
  await upsertRows(pool, shape, [{ id: 'recF', count: 1 }], { mark: { table: 'tblOther', at: Date.now() } });
  const result = await write([{ id: 'recF', count: 3 }], Date.now() - 100);
  assert.equal(result.held, []);
  assert.is((await counts()).recF, 3);
});

test.run();
