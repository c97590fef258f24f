/**
 * The keys a sweep saw, for deleting rows gone upstream: kept in memory (no temporary table,
 * so no catalog change for the server's walsenders to decode) until SPILL_AT, then in a
 * temporary table; either way the same rows go.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SeenKeys, SPILL_AT } from '../src/writer/seen-keys.ts';
import { freshDatabase } from './harness/postgres.ts';

const shape = { schema: 'public', name: 'items', key: 'id' };

async function withTable<T>(rows: number, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: await freshDatabase('seen') });
  await client.connect();
  try {
    await client.query('CREATE TABLE items (id text PRIMARY KEY, created_time timestamptz)');
    await client.query("INSERT INTO items SELECT 'rec' || n, '2026-01-01' FROM generate_series(1, $1) AS n", [rows]);
    // One created after the listing began: never deleted by it.
    await client.query("INSERT INTO items VALUES ('recnew', '2026-06-01')");
    return await use(client);
  } finally {
    await client.end();
  }
}

const listingBegan = new Date('2026-05-01');
const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `rec${from + i}`);

test('a small table: the unseen rows go, and the session never made a temporary table', async () => {
  await withTable(300, async (client) => {
    const seen = new SeenKeys(client);
    await seen.add(ids(1, 150));
    await seen.add(ids(152, 300));
    // The one made since the listing began stays, handed back as unproven (to be asked about by id).
    assert.equal(await seen.deleteUnseen(shape, 'created_time', listingBegan), { deleted: 1, unproven: ['recnew'] });
    await seen.release();
    assert.equal((await client.query("SELECT id FROM items WHERE id IN ('rec151', 'recnew') ORDER BY id")).rows, [{ id: 'recnew' }]);
    assert.equal((await client.query('SELECT pg_my_temp_schema()::int AS temp')).rows, [{ temp: 0 }], 'no temporary schema: no catalog change');
  });
});

test('a large table spills its keys to a temporary table, with the same result; a restart starts over', async () => {
  const rows = SPILL_AT + 5000;
  await withTable(rows, async (client) => {
    const seen = new SeenKeys(client);
    await seen.add(ids(1, 100));
    await seen.clear();
    for (let from = 1; from <= rows; from += 1000) await seen.add(ids(from, Math.min(rows, from + 999)).filter((id) => id !== 'rec7' && id !== `rec${rows}`));
    assert.ok((await client.query('SELECT pg_my_temp_schema()::int AS temp')).rows[0].temp > 0, 'spilled into a temporary table');
    assert.equal(await seen.deleteUnseen(shape, 'created_time', listingBegan), { deleted: 2, unproven: ['recnew'] });
    await seen.release();
    assert.equal((await client.query('SELECT count(*)::int AS n FROM items')).rows, [{ n: rows - 1 }]);
    assert.equal((await client.query("SELECT to_regclass('pg_temp.sweep_seen') AS t")).rows, [{ t: null }], 'dropped');
  });
});

test.run();
