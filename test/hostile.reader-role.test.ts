/**
 * A reader may rewrite its own role: PostgreSQL lets every role change its password and its
 * own defaults. Turned off, `default_transaction_read_only` stayed off for good, and a new
 * password locked out everyone holding the URL Tributary handed out; a session could lift its
 * own timeouts. A running sync now puts its reader back as provisioned, with the operator's
 * current limits, and ends what outlived them, at its start and periodically (here every second).
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

/**
 * The hostile change took effect: seen by `took`, or already put back by the guard, whose check
 * runs every second and may come between the change and the test's look (`warned`).
 */
async function tookEffect(took: () => Promise<boolean>, warned: (line: string) => boolean): Promise<void> {
  await waitFor('the hostile change seen, or its repair logged', async () => ((await took()) || svc.logs.lines.some(warned) ? true : undefined), 5000);
}

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
  await tookEffect(
    () => connects(mine.toString()),
    (line) => line.includes("the reader role's settings had been changed"),
  );

  await waitFor('the handed-out URL to work again', async () => ((await connects(reader)) ? true : undefined), 20_000);
  assert.not.ok(await connects(mine.toString()), "the reader's own password no longer works");
  const [setting] = await query<{ default_transaction_read_only: string }>(reader, 'SHOW default_transaction_read_only');
  assert.is(setting!.default_transaction_read_only, 'on');
  const written = await query(reader, 'SELECT 1').then(() => errorOfWrite(reader));
  assert.match(written, /read-only transaction|permission denied/);
  await waitFor('the warning', async () => (svc.logs.text.includes("the reader role's settings had been changed") ? true : undefined), 5000);
});

test("a reader that lifts its own timeout and work_mem is put back, with the operator's current limits", async () => {
  const account = await createAccount(svc, 'lifts its limits');
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  const reader: string = created.body.database.url;
  // Changed by the operator after the sync's runner started: the check must use these.
  const patched = await request(svc.api, 'PATCH', `/api/syncs/${created.body.id}`, { token: svc.adminToken, body: { reader_statement_timeout_ms: 2000 } });
  assert.is(patched.status, 200, patched.text);
  const client = new pg.Client({ connectionString: reader });
  await client.connect();
  // PostgreSQL refuses an ALTER ROLE while another of the same role commits ("tuple
  // concurrently updated", "deleted" when that one removed the setting, or a unique violation
  // on pg_db_role_setting when both add the role's first setting): the service's own check of
  // the new reader may be putting it back right then. The hostile reader simply tries again,
  // as anyone would.
  const alter = async (statement: string) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await client.query(statement);
      } catch (error) {
        if (attempt >= 5 || !/tuple concurrently (updated|deleted)|pg_db_role_setting_databaseid_rol_index/.test((error as Error).message)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
  try {
    await client.query('SET default_transaction_read_only = off');
    // Both in one transaction (one simple query): made one after the other, the guard's check
    // could come between them and put back each on its own, so that neither both changes nor
    // one repair naming both was ever seen (beside a burnt core, test).
    await alter("ALTER ROLE current_user SET statement_timeout = 0; ALTER ROLE current_user SET work_mem = '8GB'");
  } finally {
    await client.end();
  }
  const settings = () =>
    query<{ statement_timeout: string; work_mem: string }>(
      reader,
      "SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('work_mem') AS work_mem",
    ).then((rows) => rows[0]!);
  const repaired = (line: string) => line.includes('statement_timeout') && line.includes('work_mem') && line.includes('had been changed');
  await tookEffect(async () => {
    const now = await settings();
    return now.statement_timeout === '0' && now.work_mem === '8GB';
  }, repaired);
  await waitFor('the limits to be back', async () => ((await settings()).statement_timeout === '2s' ? true : undefined), 20_000);
  assert.equal(await settings(), { statement_timeout: '2s', work_mem: '4MB' });
  await waitFor('the warning naming them', async () => (svc.logs.lines.some(repaired) ? true : undefined), 5000);
});

test('a session that lifts its own timeouts is cut at the next check all the same', async () => {
  const account = await createAccount(svc, 'lifts its timeouts');
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  const limits = { reader_statement_timeout_ms: 1000, reader_idle_in_transaction_timeout_ms: 1000 };
  assert.is((await request(svc.api, 'PATCH', `/api/syncs/${created.body.id}`, { token: svc.adminToken, body: limits })).status, 200);
  const sleeper = new pg.Client({ connectionString: created.body.database.url });
  const idler = new pg.Client({ connectionString: created.body.database.url });
  idler.on('error', () => undefined);
  await Promise.all([sleeper.connect(), idler.connect()]);
  try {
    await idler.query('SET idle_in_transaction_session_timeout = 0');
    await idler.query('BEGIN');
    await idler.query('SELECT 1');
    await sleeper.query('SET statement_timeout = 0');
    const started = Date.now();
    const error = await sleeper.query('SELECT pg_sleep(20)').then(
      () => undefined,
      (e: Error) => e,
    );
    assert.match(String(error?.message), /canceling statement/);
    assert.ok(Date.now() - started < 10_000, `cancelled after ${Date.now() - started} ms`);
    // The check ends the idle transaction in the pass that cancels the statement, but a
    // terminated backend exits a moment later: until then a query still runs.
    const idled = await waitFor(
      'the idle transaction ended',
      () =>
        idler.query('SELECT 1').then(
          () => undefined,
          (e: Error) => e,
        ),
      5000,
    ).catch((e: Error) => e);
    assert.instance(idled, Error, 'the idle transaction was ended');
    assert.equal((await sleeper.query('SELECT 1 AS ok')).rows, [{ ok: 1 }], 'a cancelled statement leaves its session');
  } finally {
    await Promise.all([sleeper.end(), idler.end().catch(() => undefined)]);
  }
  await waitFor('the warning', async () => (svc.logs.text.includes("outlived the reader's timeouts") ? true : undefined), 5000);
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
