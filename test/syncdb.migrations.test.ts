/**
 * A sync database's own schema as numbered steps: a database made before the steps existed (its
 * bookkeeping as those releases built it, test/fixtures/sync-db-before-migrations.sql) is
 * brought up to date in place, its rows and replication slot intact and no event emitted; a
 * second run does nothing; a step added later is applied once, in order; and a database that
 * predates a table gets it.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { withDatabase } from '../src/db/sql.ts';
import { newDatabaseName } from '../src/ids.ts';
import { STRIPE_SCHEMA } from '../src/stripe/migrations.ts';
import { CORE } from '../src/syncdb/core.ts';
import { migrateSyncDatabase } from '../src/syncdb/migrate.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { repoRoot } from './harness/process.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
const pools: pg.Pool[] = [];

test.after(async () => {
  for (const pool of pools) await pool.end();
});

/** A provisioned database whose bookkeeping is then put back as an older release had it. */
async function olderDatabase(options: { withoutMarks?: boolean } = {}): Promise<{ pool: pg.Pool; slot: string }> {
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'migrations-test', logger);
  const pool = new pg.Pool({ connectionString: withDatabase(serverAdminUrl(), name), max: 2 });
  pools.push(pool);
  const { rows } = await pool.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public_swap'");
  for (const { name: table } of rows) await pool.query(`DROP TABLE public_swap.${table}`);
  await pool.query(await readFile(path.join(repoRoot, 'test', 'fixtures', 'sync-db-before-migrations.sql'), 'utf8'));
  if (options.withoutMarks) await pool.query('DROP TABLE public_swap._recent_writes');
  // Older releases made `_sync_meta` a logged table.
  await pool.query('ALTER TABLE public._sync_meta SET LOGGED, REPLICA IDENTITY FULL');
  await pool.query("UPDATE public._sync_meta SET started_at = '2026-01-02T03:04:05Z'");
  return { pool, slot: name };
}

/** Row changes waiting in the slot for the publication: what the decoder would make events of. */
async function pendingChanges(pool: pg.Pool, slot: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', 'tributary')
      WHERE get_byte(data, 0) IN (73, 85, 68, 84)`,
    [slot],
  );
  return Number(rows[0]!.n);
}

test('a database made before numbered steps is migrated in place: rows, slot and events untouched', async () => {
  const { pool, slot } = await olderDatabase();
  const shape = {
    schema: 'public',
    name: 'customer',
    key: 'id',
    columns: [
      { name: 'id', type: 'text' },
      { name: 'name', type: 'text' },
    ],
  };
  for (const statement of createTableStatements(shape)) await pool.query(statement);
  await pool.query("INSERT INTO customer VALUES ('cus_1', 'Ada'), ('cus_2', 'Grace')");
  await pool.query("INSERT INTO public_swap._stripe_versions VALUES ('customer', 'cus_1', 7, false)");
  await pool.query(`INSERT INTO public_swap._state VALUES ('feed', '{"cursor": "evt_1"}')`);
  // The decoder has read everything so far.
  await pool.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
  const before = (await pool.query('SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0];

  assert.is(await migrateSyncDatabase(pool, [CORE, STRIPE_SCHEMA], PUBLIC_SCHEMAS, logger), 4, 'core 1 to 3, stripe 1');
  assert.equal((await pool.query('SELECT scope, version FROM public_swap._migrations ORDER BY scope, version')).rows, [
    { scope: 'core', version: 1 },
    { scope: 'core', version: 2 },
    { scope: 'core', version: 3 },
    { scope: 'stripe', version: 1 },
  ]);
  assert.equal(
    (await pool.query("SELECT relpersistence FROM pg_class WHERE oid = 'public._sync_meta'::regclass")).rows,
    [{ relpersistence: 'u' }],
    '_sync_meta is unlogged now',
  );
  assert.equal((await pool.query("SELECT started_at = '2026-01-02T03:04:05Z' AS kept FROM public._sync_meta")).rows, [{ kept: true }]);
  assert.equal((await pool.query('SELECT id, name FROM customer ORDER BY id')).rows, [
    { id: 'cus_1', name: 'Ada' },
    { id: 'cus_2', name: 'Grace' },
  ]);
  assert.equal((await pool.query('SELECT version FROM public_swap._stripe_versions')).rows, [{ version: '7' }]);
  assert.equal((await pool.query('SELECT value FROM public_swap._state')).rows, [{ value: { cursor: 'evt_1' } }]);
  assert.equal(
    (await pool.query('SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0],
    before,
    'the slot is where it was',
  );
  assert.is(await pendingChanges(pool, slot), 0, 'no row change, so no event');
  assert.is(await migrateSyncDatabase(pool, [CORE, STRIPE_SCHEMA], PUBLIC_SCHEMAS, logger), 0, 'a second run does nothing');
});

test('a database that predates a table gets it; a step added later runs once, after the others', async () => {
  const { pool } = await olderDatabase({ withoutMarks: true });
  await migrateSyncDatabase(pool, [CORE], PUBLIC_SCHEMAS, logger);
  assert.ok((await pool.query("SELECT to_regclass('public_swap._recent_writes') IS NOT NULL AS ok")).rows[0].ok, 'the marks table was made');

  const later = {
    scope: 'core',
    migrations: [
      ...CORE.migrations,
      { version: 4, name: 'a later step', up: (c: pg.ClientBase) => c.query('CREATE TABLE public_swap._later (x int)').then(() => undefined) },
    ],
  };
  // Two runners starting at once: the step runs once.
  const applied = await Promise.all([migrateSyncDatabase(pool, [later], PUBLIC_SCHEMAS, logger), migrateSyncDatabase(pool, [later], PUBLIC_SCHEMAS, logger)]);
  assert.equal(applied.sort(), [0, 1]);
  assert.equal((await pool.query("SELECT version FROM public_swap._migrations WHERE scope = 'core' ORDER BY version")).rows, [
    { version: 1 },
    { version: 2 },
    { version: 3 },
    { version: 4 },
  ]);
});

test('a new database is provisioned with every step recorded', async () => {
  const name = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name, role: `${name}_ro` }, 'migrations-test', logger, 5, [STRIPE_SCHEMA]);
  const pool = new pg.Pool({ connectionString: withDatabase(serverAdminUrl(), name), max: 1 });
  pools.push(pool);
  assert.equal((await pool.query('SELECT scope, version FROM public_swap._migrations ORDER BY scope, version')).rows, [
    { scope: 'core', version: 1 },
    { scope: 'core', version: 2 },
    { scope: 'core', version: 3 },
    { scope: 'stripe', version: 1 },
  ]);
});

test.run();
