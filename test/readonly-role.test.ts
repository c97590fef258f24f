import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withCredentials, withDatabase } from '../src/db/sql.ts';
import { errorOf, query, serverAdminUrl } from './harness/postgres.ts';
import { createAccount, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;
let reader: string; // the sync's database.url: its read-only role
let admin: string; // the same database as the server's superuser, as the sync writer connects
let other: { name: string; url: string };

test.before(async () => {
  svc = await startTestService();
  const account = await createAccount(svc);
  const sync = (await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() })).body;
  // Another tenant's sync (one account may not sync one Stripe key twice).
  const neighbour = await createAccount(svc, 'neighbour');
  const second = (await request(svc.api, 'POST', '/api/syncs', { token: neighbour.token, body: stripeSyncBody() })).body;
  reader = sync.database.url;
  admin = withDatabase(serverAdminUrl(), sync.database.name);
  other = second.database;
  // What a sync writes: a table in public, and a rebuild in progress in public_swap. (A Stripe
  // sync's tables are built at creation; this one is replaced by a small stand-in.)
  await query(admin, 'DROP TABLE IF EXISTS public.customer CASCADE');
  await query(admin, 'CREATE TABLE public.customer (id text PRIMARY KEY, email text, metadata jsonb)');
  await query(admin, `INSERT INTO public.customer VALUES ('cus_1', 'a@example.com', '{"plan":"pro"}')`);
  await query(admin, 'CREATE TABLE public_swap.customer (id text PRIMARY KEY)');
});
test.after(async () => svc.stop());

test('the reader can SELECT synced tables and _sync_meta', async () => {
  assert.equal(await query(reader, 'SELECT id, email, metadata FROM customer'), [{ id: 'cus_1', email: 'a@example.com', metadata: { plan: 'pro' } }]);
  assert.is((await query(reader, 'SELECT count(*)::int AS n FROM _sync_meta'))[0]!.n, 1);
  assert.equal(await query(reader, 'SHOW default_transaction_read_only'), [{ default_transaction_read_only: 'on' }]);
});

const writes: Array<[string, string[]]> = [
  ['INSERT', [`INSERT INTO customer VALUES ('cus_2', 'b@example.com', NULL)`]],
  ['UPDATE', [`UPDATE customer SET email = 'x'`]],
  ['DELETE', ['DELETE FROM customer']],
  ['TRUNCATE', ['TRUNCATE customer']],
  ['CREATE TABLE', ['CREATE TABLE mine (a int)']],
  ['CREATE TEMP TABLE', ['CREATE TEMP TABLE mine (a int)']],
  ['CREATE SCHEMA', ['CREATE SCHEMA mine']],
  ['CREATE FUNCTION', ['CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$']],
  ['CREATE VIEW', ['CREATE VIEW v AS SELECT 1']],
  ['ALTER', ['ALTER TABLE customer ADD COLUMN x int']],
  ['DROP', ['DROP TABLE customer']],
  ['COMMENT', [`COMMENT ON TABLE customer IS 'mine'`]],
  ['large object', ['SELECT lo_create(0)']],
  ['read of public_swap', ['SELECT * FROM public_swap.customer']],
];

for (const [what, statements] of writes) {
  test(`the reader cannot ${what}`, async () => {
    assert.instance(await errorOf(reader, ...statements), Error, what);
    const asPlainTransaction = await errorOf(reader, 'SET default_transaction_read_only = off', ...statements);
    assert.instance(asPlainTransaction, Error, `${what} after turning read-only off`);
  });
}

test('a GRANT by the reader grants nothing', async () => {
  await errorOf(reader, 'SET default_transaction_read_only = off', 'GRANT SELECT ON customer TO PUBLIC');
  const [row] = await query<{ granted: boolean }>(admin, "SELECT has_table_privilege('public', 'customer', 'SELECT') AS granted");
  assert.is(row!.granted, false);
});

test('turning read-only off and writing fails on privileges, and changes nothing', async () => {
  const error = await errorOf(
    reader,
    'SET default_transaction_read_only = off',
    'BEGIN READ WRITE',
    `INSERT INTO customer VALUES ('cus_3', 'c@example.com', NULL)`,
  );
  assert.match(String(error?.message), /permission denied/);
  assert.equal(await query(admin, 'SELECT id FROM customer'), [{ id: 'cus_1' }]);
});

test('the reader cannot open another sync’s database, the control database or the maintenance ones', async () => {
  const url = new URL(reader);
  const credentials = (target: string) => withCredentials(target, decodeURIComponent(url.username), decodeURIComponent(url.password));
  const targets = [other.name, new URL(svc.controlUrl).pathname.slice(1), 'postgres', 'template1'];
  for (const name of targets) {
    const error = await errorOf(credentials(withDatabase(reader, name)), 'SELECT 1');
    assert.instance(error, Error, `connect to ${name}`);
    assert.match(String(error?.message), /permission denied|does not exist|not permitted/);
  }
  const theirs = await errorOf(other.url.replace(/\/[^/]+$/, url.pathname), 'SELECT 1');
  assert.instance(theirs, Error, 'the other sync’s reader cannot open this database either');
});

test('a wrong password is refused', async () => {
  const url = new URL(reader);
  url.password = 'wrong';
  const error = await errorOf(url.toString(), 'SELECT 1');
  assert.match(String(error?.message), /password authentication failed/);
});

test('the reader can use psql for the same read, and psql writes fail', async () => {
  const { execFile } = await import('node:child_process');
  const run = (sql: string) =>
    new Promise<{ code: number; out: string }>((resolve) => {
      execFile('psql', [reader, '-XAtc', sql], (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
  const read = await run('SELECT email FROM customer');
  assert.is(read.code, 0, read.out);
  assert.is(read.out.trim(), 'a@example.com');
  const write = await run(`DELETE FROM customer`);
  assert.is.not(write.code, 0);
  assert.match(write.out, /read-only transaction|permission denied/);
});

test.run();
