/**
 * A path to the control database that stops passing bytes without closing (a relay in front
 * of it that stops reading, as a network that lost its route does). Before, the control pool
 * had no deadline of its own: an API request's statement waited on the dead socket for as
 * long as TCP retries, and so did every request and sync runner behind it; the LISTEN
 * connections that wake waiters and runners went on "listening" to nothing for good. Now a
 * control statement unanswered within its deadline fails (the API answers 503 with
 * Retry-After) and drops its connection, a LISTEN connection whose heartbeat goes unanswered
 * is replaced, and once the path heals the sync takes up what changed upstream meanwhile and
 * a wait answers `ok`.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { TcpRelay } from '../sim/tcp-relay.ts';
import { CONTROL_DB_QUERY_TIMEOUT_MS, controlPool } from '../src/control/control-pool.ts';
import { TenantScope } from '../src/tenancy/scope.ts';
import { LISTEN_HEARTBEAT_MS } from '../src/db/listen.ts';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { freshControlDatabase, query, serverAdminUrl } from './harness/postgres.ts';
import { readyAirtableSync } from './harness/airtable.ts';
import { waitFor } from './harness/process.ts';
import { fileLogger } from './harness/test-log.ts';
import { loudSetUp, request, startTestService, waitOk, type TestAccount, type TestService } from './harness/service.ts';

const QUERY_TIMEOUT_MS = 2000;
const HEARTBEAT_MS = 1000;
let relay: TcpRelay;
let controlDirect: string;
let svc: TestService;
let base: FakeBase;
let account: TestAccount;
let syncId: string;
let databaseUrl: string;

test.before(
  loudSetUp(
    async () => {
      const server = new URL(serverAdminUrl());
      relay = await TcpRelay.start({ host: server.hostname, port: Number(server.port) });
      controlDirect = await freshControlDatabase();
      svc = await startTestService({
        // Only the control database is behind the relay; the sync databases' server is reached directly.
        config: { roles: ['api', 'sync', 'decoder', 'events'], databaseUrl: relay.through(controlDirect) },
        tunables: {
          controlDb: { queryTimeoutMs: QUERY_TIMEOUT_MS, heartbeatMs: HEARTBEAT_MS },
          airtable: { cycleGapMs: 250, pacedCycleMs: 0 },
          workerTickMs: 250,
        },
      });
      base = svc.airtable.createBase({ name: 'Hung control' });
      base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords('Items', [{ Name: 'one' }]);
      ({ account, syncId, databaseUrl } = await readyAirtableSync(svc, 'hung', base.id));
    },
    () => svc,
  ),
);

test.after(async () => {
  relay?.heal();
  await svc?.stop();
  await relay?.close();
});

/** The sync database's rows, read as its owner would (directly, not through the relay). */
const names = async () => (await query<{ name: string }>(databaseUrl, 'SELECT name FROM public.items ORDER BY name')).map((r) => r.name);

test('a hung control path: requests fail in time with a 503, LISTEN is replaced, and the sync resumes once it heals', async () => {
  relay.hang();
  base.createRecords('Items', [{ Name: 'during' }]);
  // A request needs the control database at once (its token, its sync): it must not wait for TCP.
  const started = Date.now();
  const during = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  const took = Date.now() - started;
  assert.is(during.status, 503, during.text);
  assert.match(during.text, /unreachable for now/);
  // The deadline, a new connection's own (also hung) and slack for a loaded machine.
  assert.ok(took < 3 * QUERY_TIMEOUT_MS + 5000, `answered after ${took} ms`);
  await waitFor(
    'the LISTEN connections to give up on their heartbeat',
    async () => (svc.logs.lines.filter((l) => l.includes('connection silent: a heartbeat went unanswered')).length >= 2 ? true : undefined),
    10 * HEARTBEAT_MS + 10_000,
  );

  relay.heal();
  // Connections caught in the hang stay dead: each fails within the deadline and is dropped.
  await waitFor(
    'the API to answer again',
    async () => ((await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).status === 200 ? true : undefined),
    30_000,
  );
  base.createRecords('Items', [{ Name: 'after' }]);
  await waitOk(svc, account.token, syncId, 60_000);
  assert.equal(await names(), ['after', 'during', 'one']);
  // Nothing of the sync's own state was lost: its passes are confirmed past the heal.
  const [row] = await query<{ through: Date }>(controlDirect, 'SELECT confirmed_through AS through FROM syncs WHERE id = $1', [syncId]);
  assert.ok(row!.through.getTime() > started, 'a pass confirmed after the hang');
});

test('a session cut off mid-transaction by a hung path does not hold its locks for good', async () => {
  // Found by the simulation: a process caught in the hang inside a transaction left its
  // session idle in it on the server, holding row locks on the syncs table; every later update
  // of those rows (leases, passes, status) waited on them, and the sync never answered a wait
  // again. The pool's sessions are now ended by the server once idle in a transaction too long.
  const relayed = controlPool({ url: relay.through(controlDirect), scope: new TenantScope(), perTenant: 2, idleInTransactionMs: 2000, logger: fileLogger() });
  const client = await relayed.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT 1 FROM syncs WHERE id = $1 FOR UPDATE', [syncId]);
    relay.hang();
    // Straight to the server, as the service's other connections would: the row is free again
    // once the server has ended the cut-off session.
    const started = Date.now();
    const direct = new pg.Client({ connectionString: controlDirect });
    await direct.connect();
    try {
      await direct.query("SET lock_timeout = '20s'");
      await direct.query('UPDATE syncs SET updated_at = updated_at WHERE id = $1', [syncId]);
    } finally {
      await direct.end();
    }
    assert.ok(Date.now() - started < 15_000, `the row was locked for ${Date.now() - started} ms`);
  } finally {
    relay.heal();
    client.release(true);
    await relayed.end();
  }
});

test('the deadlines are 30 s for a control statement and 10 s for a LISTEN heartbeat', () => {
  assert.is(CONTROL_DB_QUERY_TIMEOUT_MS, 30_000);
  assert.is(LISTEN_HEARTBEAT_MS, 10_000);
});

test.run();
