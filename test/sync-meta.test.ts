/**
 * `_sync_meta` is written at every cycle's start and end; it writes no WAL (so no walsender
 * of the server decodes it), and a crash of the server, which empties unlogged tables, costs
 * readers its row only until the next write.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { recordCycleEnd, recordCycleStart } from '../src/writer/sync-meta.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
let dir: string;
let server: CrashablePostgres;
let name: string;

test.before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-sync-meta-'));
  server = await CrashablePostgres.start('target', dir);
  name = newDatabaseName();
  await provisionDatabase({ adminUrl: server.adminUrl, name, role: `${name}_ro` }, 'sync-meta-test', logger);
});

test.after(async () => {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
});

async function withPool<T>(use: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: withDatabase(server.adminUrl, name), max: 1 });
  // end() resolves before its connection has closed: the server's fast stop right after can
  // still end it, and a pool with no 'error' listener would throw that and end the file.
  pool.on('error', () => undefined);
  try {
    return await use(pool);
  } finally {
    await pool.end();
  }
}

const rows = (pool: pg.Pool) =>
  pool.query('SELECT started_at, completed_at, extract(epoch FROM duration_last)::float8 AS seconds FROM public._sync_meta').then((r) => r.rows);

test('cycle times reach readers but never the replication slot', async () => {
  await withPool(async (pool) => {
    const started = new Date('2026-11-26T10:00:00Z');
    await recordCycleStart(pool, PUBLIC_SCHEMAS, started);
    await recordCycleEnd(pool, PUBLIC_SCHEMAS, new Date('2026-11-26T10:00:02.500Z'), 2.5);
    assert.equal(await rows(pool), [{ started_at: started, completed_at: new Date('2026-11-26T10:00:02.500Z'), seconds: 2.5 }]);
    // Everything the slot would hand the decoder: no row change, no transaction of these writes.
    const { rows: changes } = await pool.query(
      `SELECT count(*)::int AS n FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', 'tributary')
        WHERE get_byte(data, 0) IN (73, 85, 68, 84)`,
      [name],
    );
    assert.equal(changes, [{ n: 0 }]);
  });
});

test('after a crash of the server, the next write puts the row back; there is never a second', async () => {
  await server.crash();
  await server.start();
  await withPool(async (pool) => {
    assert.equal(await rows(pool), [], 'recovery empties an unlogged table');
    const started = new Date('2026-11-26T11:00:00Z');
    await recordCycleStart(pool, PUBLIC_SCHEMAS, started);
    assert.equal(await rows(pool), [{ started_at: started, completed_at: null, seconds: null }], 'running, as readers should see it');
    await recordCycleEnd(pool, PUBLIC_SCHEMAS, new Date('2026-11-26T11:00:01Z'), 1);
    await recordCycleStart(pool, PUBLIC_SCHEMAS, new Date('2026-11-26T11:00:05Z'));
    assert.equal(await rows(pool), [{ started_at: new Date('2026-11-26T11:00:05Z'), completed_at: new Date('2026-11-26T11:00:01Z'), seconds: 1 }]);
  });
});

test.run();
