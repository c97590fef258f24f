/**
 * A reader on the shared server took what it liked: `temp_file_limit` unlimited, no
 * `statement_timeout`, `SET work_mem = '8GB'` accepted (one sort held 8 GB), each failed
 * statement written in full to the server's log, and every other tenant's sessions, slots and
 * write counters in view. Now its role carries limits the operator sets per sync, the server
 * bounds each of its processes' memory, and the catalogue views of other tenants are closed.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withDatabase } from '../src/db/sql.ts';
import { errorOf, query, serverAdminUrl } from './harness/postgres.ts';
import { createAccount, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;
let sync: { id: string; database: { name: string; url: string } };
let reader: string;
let admin: string;
let other: { name: string };

test.before(async () => {
  svc = await startTestService();
  const account = await createAccount(svc);
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  sync = created.body;
  reader = sync.database.url;
  admin = withDatabase(serverAdminUrl(), sync.database.name);
  const neighbour = await createAccount(svc, 'neighbour');
  other = (await request(svc.api, 'POST', '/api/syncs', { token: neighbour.token, body: stripeSyncBody() })).body.database;
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

/**
 * PostgreSQL has no ceiling on work_mem a role cannot lift: the reader's SET is accepted. What
 * bounds it is the server's per-process memory limit: a materialised series that needs about
 * 1.5 GB fails with "out of memory", the backend's peak stays near the limit, and the session
 * and the server carry on.
 */
if (process.platform === 'linux') {
  test('SET work_mem = 8GB is accepted, but a backend cannot hold more than the per-process bound', async () => {
    await patch({ reader_statement_timeout_ms: 60_000, reader_temp_file_limit_mb: 1024 });
    const client = new pg.Client({ connectionString: reader });
    await client.connect();
    try {
      const pid: number = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await client.query("SET work_mem = '8GB'");
      await client.query('SET hash_mem_multiplier = 1000');
      const error = await client.query('SELECT count(*) FROM generate_series(1, 40000000)').then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      assert.is(error?.code, '53200', `out of memory, not ${error?.message ?? 'success'}`);
      const boundMb = Number(/Max data size\s+(\d+)/.exec(await readFile(`/proc/${pid}/limits`, 'utf8'))?.[1]) / 2 ** 20;
      assert.ok(boundMb > 0, 'the backend has a memory bound');
      const peakMb = Number(/VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
      // Resident peak: the private memory bound plus the shared buffers and code the backend touched.
      assert.ok(peakMb < boundMb + 256, `peak ${Math.round(peakMb)} MB, bound ${boundMb} MB`);
      assert.equal((await client.query('SELECT 1 AS ok')).rows, [{ ok: 1 }], 'the session carries on');
    } finally {
      await client.end();
    }
    assert.equal(await query(reader, 'SELECT id FROM customer'), [{ id: 'cus_1' }], 'and so does the server');
  });
}

test("the reader sees no other tenant's sessions, slots, locks or activity", async () => {
  const oid = (await query<{ oid: number }>(reader, 'SELECT oid FROM pg_database WHERE datname = $1', [other.name]))[0]!.oid;
  const refused = [
    'SELECT * FROM pg_stat_activity',
    'SELECT * FROM pg_stat_database',
    'SELECT * FROM pg_replication_slots',
    'SELECT * FROM pg_stat_replication',
    'SELECT * FROM pg_locks',
    'SELECT * FROM pg_prepared_xacts',
    'SELECT * FROM pg_stat_ssl',
    `SELECT pg_stat_get_db_xact_commit(${oid})`,
    `SELECT pg_stat_get_db_tuples_inserted(${oid})`,
    'SELECT * FROM pg_stat_get_activity(NULL)',
    'SELECT pg_stat_get_backend_idset()',
    'SELECT * FROM pg_get_replication_slots()',
    'SELECT * FROM pg_lock_status()',
    "SELECT pg_tablespace_size('pg_default')",
  ];
  for (const sql of refused) {
    const error = await errorOf(reader, sql);
    assert.match(String(error?.message), /permission denied/, sql);
  }
  // The service's own connection keeps its view.
  const [row] = await query<{ n: number }>(admin, 'SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = $1', [other.name]);
  assert.is(row!.n, 1);
});

function psql(...commands: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('psql', [reader, '-X', '-A', '-t', ...commands.flatMap((c) => ['-c', c])], (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

test("psql's \\dt, \\d, \\l and \\du, and a BI tool's introspection, still work for the reader's own database", async () => {
  const tables = await psql('\\dt');
  assert.is(tables.code, 0, tables.out);
  assert.match(tables.out, /public\|customer\|table/);
  assert.match(tables.out, /public\|_sync_meta\|table/);
  const described = await psql('\\d customer');
  assert.is(described.code, 0, described.out);
  assert.match(described.out, /email\|text/);
  const roles = await psql('\\du');
  assert.is(roles.code, 0, roles.out);
  assert.ok(roles.out.includes(`${sync.database.name}_ro`), roles.out);
  // \l as psql 17 asks it (the psql here may be older, and name a column PostgreSQL 17 renamed).
  const databases = await query<{ name: string }>(
    reader,
    `SELECT d.datname AS name, pg_catalog.pg_get_userbyid(d.datdba) AS owner, pg_catalog.pg_encoding_to_char(d.encoding) AS encoding,
            d.datlocale, pg_catalog.array_to_string(d.datacl, ', ') AS privileges
       FROM pg_catalog.pg_database d ORDER BY 1`,
  );
  assert.ok(
    databases.some((d) => d.name === sync.database.name),
    'its own database is listed',
  );
  // What BI tools and drivers read: information_schema, and pg_catalog joined as JDBC's getTables does.
  const visible = await query<{ schema: string; name: string }>(
    reader,
    "SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
  );
  assert.ok(
    visible.some((t) => t.name === 'customer'),
    'the synced tables are listed',
  );
  assert.ok(
    visible.some((t) => t.name === '_sync_meta'),
    '_sync_meta is listed',
  );
  assert.equal(await query(reader, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'customer' ORDER BY ordinal_position"), [
    { column_name: 'id', data_type: 'text' },
    { column_name: 'email', data_type: 'text' },
  ]);
  const jdbc = await query(
    reader,
    `SELECT n.nspname AS schema, c.relname AS name, d.description
       FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid
       LEFT JOIN pg_catalog.pg_description d ON d.objoid = c.oid AND d.objsubid = 0 AND d.classoid = 'pg_class'::regclass
      WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = 'public' ORDER BY 2`,
  );
  assert.ok(jdbc.some((r) => r.name === 'customer'));
  assert.equal(
    jdbc.filter((r) => r.name === '_sync_meta').map((r) => r.description),
    ['Tributary: when the last sync started and completed'],
  );
  assert.equal(await query(reader, 'SELECT current_database() AS db'), [{ db: sync.database.name }]);
});

test.run();
