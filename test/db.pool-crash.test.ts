/**
 * A server that crashes while the service holds one of its pooled connections checked out
 * (a backfill on demand in the middle of a chunk, a cycle in a transaction) fails what runs
 * on that connection, and nothing more: pg-pool hears a client's 'error' only while it is
 * idle, so an unguarded pool lets the crash end the whole process. Once, in a fresh-clone
 * run, `api.database-away` ended that way when the sync server crashed under a backfill's
 * connection. Every pool the service makes goes through db/pool.ts, which this checks too.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { openPool } from '../src/db/pool.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { sourceFiles } from './harness/process.ts';

let dir: string;
let server: CrashablePostgres;

test.before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-pool-crash-'));
  await chmod(dir, 0o711); // the server runs as postgres, in a folder below
  server = await CrashablePostgres.start('pooled', path.join(dir, 'pg'));
});

test.after(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

test('a checked-out connection lost in a crash fails its query; the process and the pool go on', async () => {
  const idleErrors: Error[] = [];
  const pool = openPool({ connectionString: server.adminUrl, max: 2 }, (error) => idleErrors.push(error));
  const held = await pool.connect(); // checked out, between two statements
  const idle = await pool.connect();
  idle.release(); // and one idle
  assert.is((await held.query('SELECT 1 AS n')).rows[0].n, 1);
  await server.crash();
  // Both connections' sockets close; give the events time to arrive (an unheard one ends the run here).
  await new Promise((resolve) => setTimeout(resolve, 500));
  const failed = await held.query('SELECT 1').then(
    () => undefined,
    (error: Error) => error,
  );
  assert.ok(failed, 'the held connection fails its next statement');
  held.release(failed);
  assert.ok(idleErrors.length >= 1, 'the idle connection was reported');
  await server.start();
  assert.is((await pool.query('SELECT 2 AS n')).rows[0].n, 2, 'the pool makes new connections');
  await pool.end();
});

test('every pool the service makes goes through db/pool.ts', async () => {
  const unguarded: string[] = [];
  for (const { file, text } of await sourceFiles('src')) {
    if (file === 'src/db/pool.ts') continue;
    if (/new pg\.Pool\(|new Pool\(/.test(text)) unguarded.push(`${file}: new pg.Pool`);
    if (/new FairPool\(/.test(text) && !/guardPool\(/.test(text)) unguarded.push(`${file}: a FairPool without guardPool`);
  }
  assert.equal(unguarded, []);
});

test.run();
