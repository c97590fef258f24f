/**
 * A sync runner stuck on something its own deadlines do not cover is started again by the
 * service. Before, a runner that stopped reporting (the CI stall after a worker's SIGKILL and
 * a control-database crash: the Stripe sync never answered a wait again) stayed stuck, its
 * status said nothing, and only a restart of the process helped. Now every status a runner
 * reports is a sign of life; one silent past its bound (15 min; 3 s here) is stopped, its
 * status says so, one log line says what and why, and a new runner takes over.
 *
 * The fault here: the path to Airtable stops passing bytes without closing. Its requests would
 * end at their own 30 s deadline; the bound ends them sooner, so once the path heals the sync
 * resumes within the bound instead of at the deadline.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startFakeAirtable, type FakeAirtable, type FakeBase } from '../fakes/airtable/index.ts';
import { TcpRelay } from '../sim/tcp-relay.ts';
import { SYNC_STUCK_MS } from '../src/sync/runners.ts';
import pg from 'pg';
import { withDatabase } from '../src/db/sql.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { readyAirtableSync } from './harness/airtable.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, loudSetUp, request, startTestService, waitOk, type TestAccount, type TestService } from './harness/service.ts';

const STUCK_MS = 3000;
/** The upstream request deadline the bound must beat (src/airtable/client.ts). */
const REQUEST_DEADLINE_MS = 30_000;
let fake: FakeAirtable;
let relay: TcpRelay;
let svc: TestService;
let base: FakeBase;
let account: TestAccount;
let syncId: string;
let databaseUrl: string;

test.before(
  loudSetUp(
    async () => {
      fake = await startFakeAirtable({ port: 0 });
      fake.addToken(AIRTABLE_TEST_TOKEN, { bases: '*' });
      base = fake.createBase({ name: 'Stuck' });
      base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords('Items', [{ Name: 'one' }]);
      const url = new URL(fake.url);
      relay = await TcpRelay.start({ host: url.hostname, port: Number(url.port) });
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], upstreams: new Map([['api.airtable.com', relay.through(fake.url).replace(/\/$/, '')]]) },
        tunables: { syncStuckMs: STUCK_MS, airtable: { cycleGapMs: 250, pacedCycleMs: 0 }, workerTickMs: 250 },
      });
      ({ account, syncId, databaseUrl } = await readyAirtableSync(svc, 'stuck', base.id));
    },
    () => svc,
  ),
);

test.after(async () => {
  relay?.heal();
  await svc?.stop();
  await relay?.close();
  await fake?.close();
});

const names = async () => (await query<{ name: string }>(databaseUrl, 'SELECT name FROM public.items ORDER BY name')).map((r) => r.name);
const stuckLines = () => svc.logs.lines.filter((l) => l.includes('stuck: nothing read, written or failed'));

test('a runner silent past its bound is started again, says so, and the sync resumes once the path heals', async () => {
  assert.is(stuckLines().length, 0, 'a healthy runner is never taken for stuck');
  relay.hang();
  // The hung requests' own deadline: the sync must be back before it.
  const deadline = Date.now() + REQUEST_DEADLINE_MS;
  base.createRecords('Items', [{ Name: 'during' }]);
  await waitFor('the watchdog to start the runner again', async () => (stuckLines().length >= 1 ? true : undefined), STUCK_MS * 3 + 10_000);
  // The status says it, in words, while it lasts.
  const view = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.is(view.body.status.indicator, 'yellow', view.body.status.reason);
  assert.match(view.body.status.reason, /^trouble syncing: stuck: nothing read, written or failed for \d+ s; started again$/);

  // Healed before the stuck requests' own deadline: only a runner started again goes on now.
  await new Promise((r) => setTimeout(r, STUCK_MS));
  relay.heal();
  await waitFor('the record made during the hang', async () => ((await names()).includes('during') ? true : undefined), deadline - Date.now());
  assert.ok(Date.now() < deadline, 'resumed before the hung requests would have ended');
  base.createRecords('Items', [{ Name: 'after' }]);
  await waitOk(svc, account.token, syncId, 30_000);
  assert.equal(await names(), ['after', 'during', 'one']);
  await waitFor(
    'the status normal again',
    async () => ((await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body.status.indicator === 'normal' ? true : undefined),
    30_000,
  );
});

test('a runner held by a lock on its database is taken for stuck, and the log names the wait', async () => {
  const sessionLines = () => svc.logs.lines.filter((l) => l.includes("a stuck sync runner's database"));
  const before = sessionLines().length;
  // Another session holds the table: the runner's next write waits on the lock, saying nothing.
  const admin = new pg.Client({ connectionString: withDatabase(serverAdminUrl(), new URL(databaseUrl).pathname.slice(1)) });
  await admin.connect();
  try {
    await admin.query('BEGIN');
    await admin.query('LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE');
    base.createRecords('Items', [{ Name: 'locked' }]);
    const line = await waitFor(
      "the stuck runner's database sessions in the log",
      async () =>
        sessionLines()
          .slice(before)
          .find((l) => /active Lock:relation/.test(l)),
      STUCK_MS * 3 + 15_000,
    );
    assert.match(line, /"silent_s":\d+/);
    // Both sides: the session that holds the lock, and the runner's statement that waits on it.
    assert.match(line, /idle in transaction [^"]*LOCK TABLE public\.items IN ACCESS EXCLUSIVE MODE/, line);
  } finally {
    await admin.query('ROLLBACK').catch(() => undefined);
    await admin.end();
  }
  await waitFor('the record written once the lock is gone', async () => ((await names()).includes('locked') ? true : undefined), 30_000);
});

test('the bound is 15 minutes: longer than any wait of a healthy runner', () => {
  assert.is(SYNC_STUCK_MS, 15 * 60_000);
});

test.run();
