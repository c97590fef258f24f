/**
 * The decoder when the control database fails under a flush: a batch's append waits on a lock
 * while the walsender's keepalives queue more work behind it, then the control server crashes
 * and the append fails. The queued work once rejected with nobody listening, and an unhandled
 * rejection ends the service (found when a tenant's readers took every connection slot). Now
 * the session ends and resumes once the server is back, and nothing is lost or doubled.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountStore } from '../src/control/accounts.ts';
import { provisionDatabase } from '../src/control/provisioner.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { withDatabase } from '../src/db/sql.ts';
import { Decoder } from '../src/decoder/stream.ts';
import { newDatabaseName } from '../src/ids.ts';
import { pause } from '../src/time.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { freshDatabase, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { fileLogger } from './harness/test-log.ts';

const logger = fileLogger();
const SYNC = 'sy_controlrefused';
let dir: string;
let server: CrashablePostgres;
let control: pg.Pool;
let target: pg.Pool;
let elsewhere: pg.Pool;
let decoder: Decoder | undefined;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

test.before(async () => {
  process.on('unhandledRejection', onUnhandled);
  dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-ctl-refused-'));
  server = await CrashablePostgres.start('control', dir);
  const controlUrl = server.adminUrl;
  await migrateControlDatabase(controlUrl, logger);
  control = new pg.Pool({ connectionString: controlUrl });
  control.on('error', () => undefined);
  control.on('connect', (client) => client.on('error', () => undefined));
  const accountId = (await new AccountStore(control, SecretBox.fromBase64(randomBytes(32).toString('base64'))).create('refused')).account.id;
  const slot = newDatabaseName();
  await provisionDatabase({ adminUrl: serverAdminUrl(), name: slot, role: `${slot}_ro` }, 'control-refused-password', logger);
  const targetUrl = withDatabase(serverAdminUrl(), slot);
  target = new pg.Pool({ connectionString: targetUrl });
  const shape = {
    schema: 'public',
    name: 'items',
    key: 'id',
    columns: [
      { name: 'id', type: 'text' },
      { name: 'name', type: 'text' },
    ],
  };
  for (const statement of createTableStatements(shape)) await target.query(statement);
  // WAL written in another database of the same server: the walsender moves past it and
  // sends keepalives, each of which queues a confirmation behind the flush in flight.
  elsewhere = new pg.Pool({ connectionString: await freshDatabase('elsewhere') });
  decoder = new Decoder({
    syncId: SYNC,
    accountId,
    databaseUrl: targetUrl,
    slot,
    control,
    rules: { collectionOf: (t) => t, keyOf: () => 'id' },
    logger,
    flushMs: 2,
    retryMs: 100,
  });
  decoder.start();
});

test.after(async () => {
  process.off('unhandledRejection', onUnhandled);
  await decoder?.stop();
  await control?.end().catch(() => undefined);
  await target?.end();
  await elsewhere?.end();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

const logged = async () =>
  (await control.query<{ id: string }>("SELECT value::jsonb->>'id' AS id FROM events WHERE sync_id = $1 ORDER BY seq", [SYNC])).rows.map((r) => r.id);

test('a flush failing under queued keepalives ends no process; the events arrive once the server is back', async () => {
  await target.query("INSERT INTO items VALUES ('before', 'a')");
  await waitFor('the first event', async () => ((await logged()).includes('before') ? true : undefined), 20_000);

  // The next append waits on a lock while keepalives queue up behind it.
  const locker = new pg.Client({ connectionString: server.adminUrl });
  locker.on('error', () => undefined);
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
  await target.query("INSERT INTO items VALUES ('during', 'b')");
  for (let i = 0; i < 20; i++) {
    await elsewhere.query("SELECT pg_logical_emit_message(true, 'elsewhere', repeat('x', 2000))");
    await pause(50);
  }
  // The append in flight fails: the server goes down under it.
  await server.crash();
  await pause(1500);
  await server.start();
  await target.query("INSERT INTO items VALUES ('after', 'c')");

  await waitFor('every event after the restart', async () => ((await logged().catch((): string[] => [])).includes('after') ? true : undefined), 60_000);
  assert.equal(await logged(), ['before', 'during', 'after'], 'each change once, in order');
  assert.equal(unhandled.map(String), [], 'no unhandled rejection');
});

test.run();
