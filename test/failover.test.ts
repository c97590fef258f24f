/**
 * Failover to a standby, as a hosted PostgreSQL does it. The sync server is a primary with a
 * hot standby of the embedded PostgreSQL 17 (a low-level base backup; the standby syncs
 * failover slots, the primary holds logical decoding back until the standby has the WAL). The
 * service reaches the server by a name that follows the primary (here a relay, as a DNS
 * record or a virtual IP would be). Upstream edits go on all through; the primary is killed,
 * the standby promoted, the name moved to it. The decoder resumes from the slot the standby
 * kept: no gap, nothing lost (the stream folded per record equals the tables), repeats only
 * with their keys and values unchanged; and the reader's URL still works. Before, slots were
 * not failover slots: the promoted standby had none, and the stream stopped.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { compareFold, type DeliveredEvent, EventFold } from '../sim/check/events.ts';
import { RestTail } from '../sim/check/rest-events.ts';
import { TcpRelay } from '../sim/tcp-relay.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';
import { type Standby, startStandby } from './harness/standby.ts';
import { tablesAtOnePoint } from './harness/stream.ts';

let primary: SecondServer;
let standby: Standby;
/** The server's name for the service: it follows the primary. */
let name: TcpRelay;
let svc: TestService;
let decoder: TestService | undefined;
let account: TestAccount;
let base: FakeBase;
let syncId: string;
let slot: string;
let readerUrl: string;
let tail: RestTail;
/** Every event read from the start, across both tests. */
const stream: DeliveredEvent[] = [];

const TUNABLES = {
  airtable: { pollIntervalMs: 300, cycleGapMs: 1000 },
  decoder: { lagReportMs: 500, lagRewriteMs: 3000, retryMs: 300 },
  workerTickMs: 200,
};

const startDecoder = () =>
  startTestService({
    config: {
      roles: ['decoder'],
      databaseUrl: svc.controlUrl,
      adminToken: svc.adminToken,
      dataDir: svc.dataDir,
      targetDatabaseUrl: name.through(primary.adminUrl),
    },
    tunables: TUNABLES,
  });

test.before(
  loudSetUp(
    async () => {
      primary = await startSecondServer();
      name = await TcpRelay.start({ host: '127.0.0.1', port: primary.port });
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'events'], targetDatabaseUrl: name.through(primary.adminUrl) },
        airtable: { rateLimit: false },
        tunables: TUNABLES,
      });
      decoder = await startDecoder();
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Failover' });
      base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords(
        'Tasks',
        Array.from({ length: 30 }, (_, i) => ({ Name: `task ${i}` })),
      );
      const sync = await createAirtableSync(svc, account, base.id);
      syncId = sync.id;
      readerUrl = sync.readerUrl;
      slot = new URL(sync.adminUrl).pathname.slice(1);
      tail = new RestTail(
        { restUrl: `http://127.0.0.1:${svc.service.eventsPort}`, username: account.eventsUsername, password: account.eventsPassword },
        `svc.${syncId}.`,
      );
    },
    () => svc,
  ),
);

test.after(async () => {
  await decoder?.stop();
  await svc?.stop();
  await name?.close();
  await standby?.stop();
  await primary?.stop();
});

async function caughtUp(): Promise<void> {
  const answer = await request(svc.api, 'GET', `/api/wait/${syncId}?timeout=60000`, { token: account.token });
  assert.is(answer.body?.ok, true, answer.text);
}

const failoverOf = async (url: string) =>
  (await query<{ failover: boolean }>(url, 'SELECT failover FROM pg_replication_slots WHERE slot_name = $1', [slot]))[0]?.failover;

/** Upstream edits every 100 ms until stopped: updates, creates and deletes. */
function startEdits(): { stop: () => Promise<number> } {
  let stopped = false;
  let n = 0;
  const running = (async () => {
    while (!stopped) {
      const records = base.records('Tasks');
      const pick = n % 7;
      if (pick === 0 && records.length > 10) base.deleteRecords('Tasks', [records[n % records.length]!.id]);
      else if (pick === 1) base.createRecords('Tasks', [{ Name: `made ${n}` }]);
      else base.updateRecord('Tasks', records[n % records.length]!.id, { Name: `edit ${n}` });
      n++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await running;
      return n;
    },
  };
}

test('a slot made before failover slots is made one by its decoder', async () => {
  assert.is(await failoverOf(primary.adminUrl), true, 'a new sync gets a failover slot');
  // Everything so far decoded first: a slot dropped under changes not yet decoded loses them.
  await tablesAtOnePoint({ reader: readerUrl, caughtUp, tail, stream });
  // As one made by an earlier release: the same slot, not a failover slot (nothing is edited meanwhile).
  await decoder!.stop();
  decoder = undefined;
  await query(primary.databaseUrl(slot), 'SELECT pg_drop_replication_slot($1)', [slot]);
  await query(primary.databaseUrl(slot), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
  assert.is(await failoverOf(primary.adminUrl), false);
  decoder = await startDecoder();
  await waitFor('the slot made a failover slot', async () => ((await failoverOf(primary.adminUrl)) ? true : undefined), 30_000);
  await caughtUp();
});

test('primary killed, standby promoted: the decoder goes on from the synced slot, nothing lost', async () => {
  standby = await startStandby(primary);
  const edits = startEdits();
  // The standby has the slot once its worker has synced it and it is no longer temporary.
  await waitFor(
    'the slot synced to the standby',
    async () => {
      const [row] = await query<{ synced: boolean; temporary: boolean }>(
        standby.adminUrl,
        'SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1',
        [slot],
      );
      return row?.synced && !row.temporary ? true : undefined;
    },
    90_000,
    500,
  );
  await new Promise((resolve) => setTimeout(resolve, 2000));
  stream.push(...(await tail.next()));
  await primary.crash();
  await standby.promote();
  name.retarget({ host: '127.0.0.1', port: standby.port });
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const made = await edits.stop();
  assert.ok(made > 20, `${made} edits`);

  // One more edit after the failover, then everything is caught up.
  const [last] = base.createRecords('Tasks', [{ Name: 'after the failover' }]);
  await waitFor(
    'the last edit in the table',
    async () => ((await query(readerUrl, 'SELECT 1 FROM tasks WHERE id = $1', [last!.id])).length === 1 ? true : undefined),
    60_000,
  );
  const tables = await tablesAtOnePoint({ reader: readerUrl, caughtUp, tail, stream });
  assert.equal(
    stream.filter((e) => JSON.parse(e.value).event === 'gap').map((e) => e.value),
    [],
    'no gap: the slot was there',
  );
  const fold = new EventFold('rest, across the failover').add(stream);
  assert.equal([...fold.violations, ...compareFold('across the failover', fold, tables)], []);
  assert.ok(
    stream.some((e) => JSON.parse(e.value).id === last!.id),
    'the edit after the failover is an event',
  );
  // The slot on the new primary is the synced one, streaming.
  const [row] = await query<{ synced: boolean; active: boolean }>(standby.adminUrl, 'SELECT synced, active FROM pg_replication_slots WHERE slot_name = $1', [
    slot,
  ]);
  assert.equal(row, { synced: true, active: true });
  const view = (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body;
  assert.is(view.database.url, readerUrl, 'the reader keeps its URL');
  assert.is(view.events.slot_gap, null);
});

test.run();
