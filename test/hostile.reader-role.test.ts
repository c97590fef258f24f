/**
 * A reader may rewrite its own role: PostgreSQL lets every role change its password and its
 * own defaults. Turned off, `default_transaction_read_only` stayed off for good, and a new
 * password locked out everyone holding the URL Tributary handed out. A running sync now puts
 * its reader back as provisioned, at its start and periodically (here every second).
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;

test.before(async () => {
  svc = await startTestService({ config: { roles: ['api', 'sync'] }, tunables: { workerTickMs: 250, readerCheckMs: 1000 } });
});
test.after(async () => svc.stop());

async function connects(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

test('a reader that changes its own password and defaults is put back as provisioned', async () => {
  const account = await createAccount(svc);
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  const reader: string = created.body.database.url;
  const database: string = created.body.database.name;

  const client = new pg.Client({ connectionString: reader });
  await client.connect();
  try {
    await client.query('SET default_transaction_read_only = off');
    await client.query('ALTER ROLE current_user SET default_transaction_read_only = off');
    await client.query(`ALTER ROLE current_user IN DATABASE ${pg.escapeIdentifier(database)} SET default_transaction_read_only = off`);
    await client.query("ALTER ROLE current_user WITH PASSWORD 'mine-now'");
  } finally {
    await client.end();
  }
  const mine = new URL(reader);
  mine.password = 'mine-now';
  assert.ok(await connects(mine.toString()), 'the hostile change took effect');

  await waitFor('the handed-out URL to work again', async () => ((await connects(reader)) ? true : undefined), 20_000);
  assert.not.ok(await connects(mine.toString()), "the reader's own password no longer works");
  const [setting] = await query<{ default_transaction_read_only: string }>(reader, 'SHOW default_transaction_read_only');
  assert.is(setting!.default_transaction_read_only, 'on');
  const written = await query(reader, 'SELECT 1').then(() => errorOfWrite(reader));
  assert.match(written, /read-only transaction|permission denied/);
  await waitFor('the warning', async () => (svc.logs.text.includes("the reader role's settings had been changed") ? true : undefined), 5000);
});

async function errorOfWrite(url: string): Promise<string> {
  try {
    await query(url, 'CREATE TABLE public.mine (x int)');
    return 'no error';
  } catch (error) {
    return (error as Error).message;
  }
}

test.run();
