/**
 * Full disks, seen from outside. A pool server whose data lives on a small tmpfs is filled
 * while upstream edits go on: its sync turns red at once with the reason, a sync on another
 * server of the pool goes on as usual, and once space is freed the full one catches up by
 * itself with every edit in its table and its stream. Then the control database's disk
 * (its own server on a tmpfs) is filled: the event log takes nothing, the API answers 503 for
 * what must write there, and after space is freed the events of the changes made meanwhile
 * are logged, none lost. Before, a full disk was a fault no test made: a sync
 * stayed yellow ("trouble syncing") for five minutes, and the API answered 500.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { compareFold, type DeliveredEvent, EventFold } from '../sim/check/events.ts';
import { RestTail } from '../sim/check/rest-events.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';
import { tablesAtOnePoint } from './harness/stream.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let small: SecondServer;
let other: SecondServer;
let control: SecondServer;
let svc: TestService;
let account: TestAccount;

const TUNABLES = {
  airtable: { pollIntervalMs: 300, cycleGapMs: 1000 },
  decoder: { lagReportMs: 500, lagRewriteMs: 3000, retryMs: 300 },
  workerTickMs: 200,
};

interface Made {
  id: string;
  base: FakeBase;
  reader: string;
  tail: RestTail;
  /** Its events read so far. */
  stream: DeliveredEvent[];
}

/** Reads the sync's stream on; answers what came. */
async function readOn(made: Made): Promise<DeliveredEvent[]> {
  const more = await made.tail.next();
  made.stream.push(...more);
  return more;
}

test.before(
  loudSetUp(
    async () => {
      small = await startSecondServer({ tmpfsMb: 160 });
      other = await startSecondServer();
      control = await startSecondServer({ tmpfsMb: 160 });
      await query(control.adminUrl, 'CREATE DATABASE tributary_control');
      svc = await startTestService({
        config: {
          roles: ['api', 'sync', 'decoder', 'events'],
          databaseUrl: control.databaseUrl('tributary_control'),
          targetDatabaseUrl: small.adminUrl,
        },
        airtable: { rateLimit: false },
        tunables: TUNABLES,
      });
      const added = await request(svc.api, 'POST', '/api/servers', { token: svc.adminToken, body: { url: other.adminUrl, region: 'eu-west-1', capacity: 5 } });
      assert.is(added.status, 201, added.text);
      account = await createAccount(svc);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  for (const server of [small, other, control]) await server?.stop();
});

async function makeSync(name: string, region?: string): Promise<Made> {
  const base = svc.airtable.createBase({ name });
  base.createTable('Tasks', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Notes', type: 'multilineText' },
  ]);
  base.createRecords(
    'Tasks',
    Array.from({ length: 20 }, (_, i) => ({ Name: `task ${i}` })),
  );
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN, ...(region ? { region } : {}) },
  });
  assert.is(created.status, 201, created.text);
  const id = created.body.id as string;
  await caughtUp(id);
  const tail = new RestTail(
    { restUrl: `http://127.0.0.1:${svc.service.eventsPort}`, username: account.eventsUsername, password: account.eventsPassword },
    `svc.${id}.`,
  );
  return { id, base, reader: created.body.database.url, tail, stream: [] };
}

async function caughtUp(id: string): Promise<void> {
  const answer = await request(svc.api, 'GET', `/api/wait/${id}?timeout=60000`, { token: account.token });
  assert.is(answer.body?.ok, true, `${id}: ${answer.text}`);
}

const view = async (id: string) => (await request(svc.api, 'GET', `/api/syncs/${id}`, { token: account.token })).body;

/** Many new records with some bulk: the table must grow to take them. */
const bulk = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({ Name: `${tag} ${i}`, Notes: `${tag} `.repeat(200) }));

/** The stream from the start folds to the tables, read at one point. */
async function foldsToTables(made: Made): Promise<void> {
  const tables = await tablesAtOnePoint({ reader: made.reader, caughtUp: () => caughtUp(made.id), tail: made.tail, stream: made.stream });
  const fold = new EventFold(`rest ${made.id}`).add(made.stream);
  assert.equal([...fold.violations, ...compareFold(made.id, fold, tables)], []);
}

test("a sync server's full disk: its sync red with the reason, the other goes on, and all catch up after", async () => {
  const full = await makeSync('On the small disk');
  const fine = await makeSync('Elsewhere', 'eu-west-1');
  // A fresh WAL segment first, so that the WAL has room while the tables have none.
  await query(small.adminUrl, 'SELECT pg_switch_wal()');
  await query(small.adminUrl, 'CHECKPOINT');
  await small.fill(256 * 1024);
  try {
    full.base.createRecords('Tasks', bulk('full', 400));
    fine.base.createRecords('Tasks', bulk('fine', 50));
    const red = await waitFor(
      'the full sync red',
      async () => {
        const v = await view(full.id);
        return v.status.indicator === 'red' ? v : undefined;
      },
      60_000,
    );
    assert.match(
      red.status.reason,
      /^the sync database's server is out of disk space \(.*No space left on device.*\): nothing can be written until space is freed/,
    );
    // The other server's sync goes on.
    await caughtUp(fine.id);
    assert.is((await query(fine.reader, "SELECT count(*)::int AS n FROM tasks WHERE name LIKE 'fine %'"))[0]!.n, 50);
    assert.is((await view(fine.id)).status.indicator, 'normal');
  } finally {
    await small.unfill();
  }
  await waitFor(
    'the full sync caught up',
    async () => ((await query<{ n: number }>(full.reader, "SELECT count(*)::int AS n FROM tasks WHERE name LIKE 'full %'"))[0]!.n === 400 ? true : undefined),
    120_000,
  );
  await waitFor('the full sync normal again', async () => ((await view(full.id)).status.indicator === 'normal' ? true : undefined), 60_000);
  await foldsToTables(full);
  await foldsToTables(fine);
});

test("the control database's full disk: no event logged, 503s, and every event logged after", async () => {
  const made = await makeSync('Control full', 'eu-west-1');
  await readOn(made);
  await query(control.adminUrl, 'SELECT pg_switch_wal()');
  await query(control.adminUrl, 'CHECKPOINT');
  // Read on a connection made before the disk is full: a new backend may not start then.
  const reading = new pg.Client({ connectionString: control.databaseUrl('tributary_control') });
  reading.on('error', () => {}); // the server's stop at the end ends it
  await reading.connect();
  const logged = async () => Number((await reading.query<{ seq: string }>('SELECT seq FROM decoder_progress WHERE sync_id = $1', [made.id])).rows[0]!.seq);
  const before = await logged();
  // Changes made straight in the sync database, 15 transactions of 20 updates: the syncs
  // themselves cannot go on meanwhile (their upstream quotas are kept in the control database).
  const syncDb = other.databaseUrl(new URL(made.reader).pathname.slice(1));
  await control.fill(0);
  // As after any change to the catalogs: every new connection to the control database fails
  // while the disk is full, not only writes (the service must make do with those it has).
  await control.dropInitFiles();
  await control.fill(0);
  try {
    for (let i = 0; i < 15; i++) await query(syncDb, "UPDATE tasks SET notes = coalesce(notes, '') || '.'");
    // What still fits in the log's pages is logged; then it stops taking events.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const stuck = await logged();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.is(await logged(), stuck, 'the log stopped taking events');
    assert.ok(stuck < before + 300, `${stuck - before} of the 300 events logged while the disk is full`);
    // What must write the control database answers 503 and says why.
    const asked = await request(svc.api, 'POST', `/api/syncs/${made.id}/backfills`, { token: account.token });
    assert.is(asked.status, 503, asked.text);
    assert.match(asked.body.error.message, /out of disk space/);
    assert.ok(asked.headers.get('retry-after'), 'a 503 says when to try again');
  } finally {
    await control.unfill();
  }
  await waitFor('every change logged', async () => ((await logged()) >= before + 300 ? true : undefined), 60_000);
  await caughtUp(made.id);
  await readOn(made);
  const dotted = made.stream.filter((e) => {
    const event = JSON.parse(e.value);
    return event.event === 'updated' && /^\.+$/.test(String(event.data.notes ?? ''));
  });
  assert.ok(dotted.length >= 300, `${dotted.length} events of the 300 changes made while the disk was full`);
  await foldsToTables(made);
  await reading.end();
});

test.run();
