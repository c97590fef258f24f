/**
 * A reader on the shared server took what it liked: `temp_file_limit` unlimited, no
 * `statement_timeout`, `SET work_mem = '8GB'` accepted (one sort held 8 GB), each failed
 * statement written in full to the server's log, and every other tenant's sessions, slots and
 * write counters in view. Now its role carries limits the operator sets per sync, the server
 * bounds each of its processes' memory, and the catalogue views of other tenants are closed.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withDatabase } from '../src/db/sql.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { createAccount, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;
let sync: { id: string; database: { name: string; url: string } };
let reader: string;
let admin: string;

test.before(async () => {
  svc = await startTestService();
  const account = await createAccount(svc);
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  sync = created.body;
  reader = sync.database.url;
  admin = withDatabase(serverAdminUrl(), sync.database.name);
  // A Stripe sync's tables are built at creation; this one is replaced by a small stand-in.
  await query(admin, 'DROP TABLE IF EXISTS public.customer CASCADE');
  await query(admin, 'CREATE TABLE public.customer (id text PRIMARY KEY, email text)');
  await query(admin, "INSERT INTO public.customer VALUES ('cus_1', 'a@example.com')");
});
test.after(async () => svc.stop());

const patch = (body: object, token = svc.adminToken) => request(svc.api, 'PATCH', `/api/syncs/${sync.id}`, { token, body });

/** Runs statements on one connection of the reader's; answers the last one's rows or the error. */
async function asReader(statements: string[], options: pg.ClientConfig = {}): Promise<{ rows?: pg.QueryResultRow[]; error?: Error & { code?: string } }> {
  const client = new pg.Client({ connectionString: reader, ...options });
  try {
    await client.connect();
    let rows: pg.QueryResultRow[] = [];
    for (const sql of statements) rows = (await client.query(sql)).rows;
    return { rows };
  } catch (error) {
    return { error: error as Error };
  } finally {
    await client.end().catch(() => undefined);
  }
}

test('the sync view shows the reader limits; only the operator changes them, within range', async () => {
  const view = await request(svc.api, 'GET', `/api/syncs/${sync.id}`, { token: svc.adminToken });
  assert.is(view.body.database.statement_timeout_ms, 60_000);
  assert.is(view.body.database.idle_in_transaction_timeout_ms, 300_000);
  assert.is(view.body.database.temp_file_limit_mb, 1024);
  const account = await createAccount(svc, 'not the operator');
  const mine = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  const own = await request(svc.api, 'PATCH', `/api/syncs/${mine.body.id}`, { token: account.token, body: { reader_statement_timeout_ms: 0 } });
  assert.is(own.status, 403, own.text);
  assert.match(own.body.error.message, /operator/);
  for (const body of [{ reader_temp_file_limit_mb: 0 }, { reader_statement_timeout_ms: -1 }, { reader_idle_in_transaction_timeout_ms: 'soon' }]) {
    const bad = await patch(body);
    assert.is(bad.status, 400, JSON.stringify(body));
  }
  const [settings] = await query<{ statement_timeout: string; temp_file_limit: string }>(
    reader,
    "SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('temp_file_limit') AS temp_file_limit",
  );
  assert.equal(settings, { statement_timeout: '1min', temp_file_limit: '1GB' });
});

test('the reader cannot raise temp_file_limit: not by SET, ALTER ROLE or connection options', async () => {
  const writable = 'SET default_transaction_read_only = off';
  for (const statement of ['SET temp_file_limit = -1', 'ALTER ROLE current_user SET temp_file_limit = -1', 'ALTER ROLE current_user RESET temp_file_limit']) {
    const { error } = await asReader([writable, statement]);
    assert.match(String(error?.message), /permission denied to set parameter "temp_file_limit"/, statement);
  }
  const { error } = await asReader(['SELECT 1'], { options: '-c temp_file_limit=-1' });
  assert.match(String(error?.message), /permission denied to set parameter "temp_file_limit"/);
  // RESET ALL by the role itself leaves what only a superuser set.
  assert.equal((await asReader([writable, 'ALTER ROLE current_user RESET ALL'])).error, undefined);
  assert.equal((await asReader(['SHOW temp_file_limit'])).rows, [{ temp_file_limit: '1GB' }]);
});

test('a sort past the temp file limit fails, with the limit the operator set', async () => {
  const set = await patch({ reader_temp_file_limit_mb: 5 });
  assert.is(set.status, 200, set.text);
  assert.is(set.body.database.temp_file_limit_mb, 5);
  const { error } = await asReader(["SET work_mem = '64kB'", 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 2000000) g ORDER BY g DESC) s']);
  assert.match(String(error?.message), /temporary file size exceeds temp_file_limit \(5120kB\)/);
});

test('statement_timeout cancels a statement that runs past it', async () => {
  assert.is((await patch({ reader_statement_timeout_ms: 1000 })).status, 200);
  const started = Date.now();
  const { error } = await asReader(['SELECT pg_sleep(10)']);
  assert.match(String(error?.message), /canceling statement due to statement timeout/);
  assert.ok(Date.now() - started < 5000, `cancelled after ${Date.now() - started} ms`);
});

test('a transaction left idle past the timeout ends its session', async () => {
  assert.is((await patch({ reader_idle_in_transaction_timeout_ms: 1000 })).status, 200);
  const client = new pg.Client({ connectionString: reader });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT 1');
    await new Promise((r) => setTimeout(r, 2500));
    const error = await client.query('SELECT 1').then(
      () => undefined,
      (e: Error) => e,
    );
    assert.instance(error, Error, 'the session was ended');
  } finally {
    await client.end().catch(() => undefined);
  }
  const [row] = await query<{ setting: string }>(reader, "SELECT current_setting('idle_in_transaction_session_timeout') AS setting");
  assert.is(row!.setting, '1s');
});

/** The server's log as the superuser reads it (the embedded server writes `server.log` in its data folder). */
async function serverLogFrom(offset: number): Promise<string> {
  const [row] = await query<{ text: string }>(serverAdminUrl(), "SELECT pg_read_file('server.log', $1, 10000000) AS text", [offset]);
  return row!.text;
}
const serverLogSize = async () => Number((await query<{ size: string }>(serverAdminUrl(), "SELECT (pg_stat_file('server.log')).size AS size"))[0]!.size);

test('a failed statement is logged as its error, without its text', async () => {
  const from = await serverLogSize();
  const marker = `marker_${Date.now()}`;
  const { error } = await asReader([`SELECT 1/0 AS ${marker}`]);
  assert.match(String(error?.message), /division by zero/);
  const log = await serverLogFrom(from);
  assert.match(log, /ERROR:\s+division by zero/, 'the error itself is logged');
  assert.not.ok(log.includes(marker), `the statement is not: ${log}`);
});

test.run();
