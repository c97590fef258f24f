/**
 * A replication slot lost, seen from outside: dropped by hand while its decoder runs, and
 * invalidated by PostgreSQL when a stopped decoder's slot held more WAL than the server's
 * max_slot_wal_keep_size (64 MB here) and a checkpoint removed it. Upstream edits land in the
 * table meanwhile. Each time the service notices, makes a new slot, puts a gap marker on the
 * sync's topic and reads every table again after it: the stream folded from the marker equals
 * the tables, the whole stream folded by the marker's rule does too, the status says what
 * happened while the tables are read, and the log says it once. Before, the decoder retried
 * the missing slot every few seconds for good and the status said "syncing as usual".
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import type { readTables } from '../sim/check/canonical.ts';
import { compareFold, type DeliveredEvent, EventFold } from '../sim/check/events.ts';
import { RestTail } from '../sim/check/rest-events.ts';
import { TestReceiver } from './harness/receiver.ts';
import { launchBrowser } from './harness/browser.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';
import { tablesAtOnePoint } from './harness/stream.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let server: SecondServer;
/** API, sync workers and the REST events: these run all along. */
let svc: TestService;
/** The decoder (and its backfills), apart, so that a test can stop it. */
let decoder: TestService | undefined;
let account: TestAccount;
let base: FakeBase;
let syncId: string;
let database: string;
let readerUrl: string;
let tail: RestTail;
let receiver: TestReceiver;
const stream: DeliveredEvent[] = [];
/** What a webhook got on `path`, as events. */
const deliveredTo = (path: string): DeliveredEvent[] => receiver.on(path).map((r) => ({ key: r.id, value: r.body, where: `webhook ${path}` }));

const TUNABLES = {
  airtable: { pollIntervalMs: 300, cycleGapMs: 1000 },
  decoder: { lagReportMs: 500, lagRewriteMs: 3000, retryMs: 300 },
  backfills: { lookGapMs: 50 },
  workerTickMs: 200,
};

async function startDecoder(): Promise<TestService> {
  return startTestService({
    config: {
      roles: ['decoder'],
      databaseUrl: svc.controlUrl,
      adminToken: svc.adminToken,
      dataDir: svc.dataDir,
      targetDatabaseUrl: server.adminUrl,
      webhookAllowPrivate: true,
      // Three partitions: the marker must reach each of them.
      eventPartitions: 3,
    },
    tunables: TUNABLES,
  });
}

test.before(
  loudSetUp(
    async () => {
      server = await startSecondServer({ slotWalKeepMb: 64 });
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'events'], targetDatabaseUrl: server.adminUrl, webhookAllowPrivate: true },
        airtable: { rateLimit: false },
        tunables: TUNABLES,
      });
      receiver = await TestReceiver.start();
      decoder = await startDecoder();
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Lost slots' });
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Notes', type: 'multilineText' },
      ]);
      base.createRecords(
        'Tasks',
        Array.from({ length: 40 }, (_, i) => ({ Name: `task ${i}`, Notes: `note ${i}` })),
      );
      const sync = await createAirtableSync(svc, account, base.id);
      syncId = sync.id;
      readerUrl = sync.readerUrl;
      database = new URL(sync.adminUrl).pathname.slice(1);
      tail = new RestTail(
        { restUrl: `http://127.0.0.1:${svc.service.eventsPort}`, username: account.eventsUsername, password: account.eventsPassword },
        `svc.${syncId}.`,
      );
      // One webhook takes everything, one only inserts: a marker passes every filter.
      const port = new URL(receiver.origin).port;
      for (const [path, filter] of [
        ['/all', undefined],
        ['/inserts', { events: ['inserted'] }],
      ] as const) {
        const hook = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
          token: account.token,
          body: { url: `http://127.0.0.1:${port}${path}`, topics: [`svc.${syncId}.tasks`], ...(filter ? { filter } : {}) },
        });
        assert.is(hook.status, 201, hook.text);
      }
      await caughtUp();
      stream.push(...(await tail.next()));
    },
    () => svc,
  ),
);

test.after(async () => {
  await receiver?.close();
  await decoder?.stop();
  await svc?.stop();
  await server?.stop();
});

const view = async () => (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body;

async function caughtUp(): Promise<void> {
  const answer = await request(svc.api, 'GET', `/api/wait/${syncId}?timeout=60000`, { token: account.token });
  assert.is(answer.body?.ok, true, answer.text);
}

/** Five upstream edits: three updates, a delete and a create; then the table holds them. */
async function fiveEdits(tag: string): Promise<void> {
  const records = base.records('Tasks');
  for (const record of records.slice(0, 3)) base.updateRecord('Tasks', record.id, { Name: `${record.fields.Name} ${tag}` });
  base.deleteRecords('Tasks', [records[3]!.id]);
  base.createRecords('Tasks', [{ Name: `new ${tag}`, Notes: 'made in the gap' }]);
  await waitFor(
    'the edits in the table',
    async () => ((await query(readerUrl, 'SELECT 1 FROM tasks WHERE name = $1', [`new ${tag}`])).length === 1 ? true : undefined),
    30_000,
  );
}

const kindOf = (e: DeliveredEvent) => (JSON.parse(e.value) as { event: string }).event;

/**
 * Reads the stream on until it holds a gap marker after `from` and the re-read it names is
 * done; then the tables and the stream at one point (the log caught up and nothing new).
 */
async function afterGap(from: number, tag: string): Promise<{ marker: any; after: DeliveredEvent[]; tables: Awaited<ReturnType<typeof readTables>> }> {
  const marker = await waitFor(
    `the gap marker (${tag})`,
    async () => {
      stream.push(...(await tail.next()));
      const found = stream.slice(from).find((e) => kindOf(e) === 'gap');
      return found && JSON.parse(found.value);
    },
    60_000,
  );
  await waitFor(
    `the re-read ${marker.data.backfill} done`,
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${syncId}/backfills/${marker.data.backfill}`, { token: account.token });
      assert.is(answer.status, 200, answer.text);
      assert.is(answer.body.reason, 'slot_lost');
      return answer.body.state === 'done' ? true : undefined;
    },
    60_000,
  );
  const tables = await tablesAtOnePoint({ reader: readerUrl, caughtUp, tail, stream });
  // Each partition from its copy of the marker on (REST reads partition by partition).
  const after: DeliveredEvent[] = [];
  const partitions = new Map<string, DeliveredEvent[]>();
  for (const e of stream.slice(from)) {
    const partition = e.where.replace(/@\d+$/, '');
    partitions.set(partition, [...(partitions.get(partition) ?? []), e]);
  }
  for (const [partition, events] of partitions) {
    const at = events.findIndex((e) => kindOf(e) === 'gap');
    assert.ok(at >= 0, `no marker in ${partition}`);
    after.push(...events.slice(at + 1));
  }
  assert.is(partitions.size, 3, [...partitions.keys()].join(', '));
  return { marker, after, tables };
}

async function checkGap(tag: string, gap: Awaited<ReturnType<typeof afterGap>>, editsInGap: boolean): Promise<void> {
  const { marker, after, tables } = gap;
  assert.is(marker.collection, 'tasks');
  assert.is(marker.table_db_name, 'tasks');
  assert.match(marker.id, /^gap_[a-z0-9]{16}$/);
  assert.is(marker.data.gap, marker.id);
  assert.match(marker.data.commit_lsn, /^[0-9A-F]+\/[0-9A-F]+$/);
  // Every row the table holds came after the marker: read again, or made after its read.
  const after_ = new Map(after.map((e) => [JSON.parse(e.value).id as string, kindOf(e)]));
  const rows = [...tables.get('tasks')!.rows.keys()];
  const unseen = rows.filter((id) => !after_.has(id));
  assert.equal(unseen, [], `rows with no event after the ${tag} marker`);
  assert.ok(after.filter((e) => kindOf(e) === 'read').length >= rows.length - 5, `the re-read covers the table (${tag})`);
  // From the marker on, the stream is the tables.
  const fromMarker = new EventFold(`rest after the ${tag} gap`, { midStream: true }).add(after);
  assert.equal([...fromMarker.violations, ...compareFold(`from the ${tag} marker`, fromMarker, tables)], []);
  // And the whole stream, the marker's rule applied (docs/events.md#gaps-a-lost-replication-slot), is too.
  const whole = new EventFold(`rest, all of it (${tag})`).add(stream);
  assert.equal([...whole.violations, ...compareFold(`the whole stream (${tag})`, whole, tables)], []);
  // On webhooks, once per gap (not per partition), on a filtered one too; and by the marker's
  // rule the webhook's stream folds to the tables, though it keeps order per record only.
  const markersTo = (path: string) =>
    deliveredTo(path)
      .filter((e) => kindOf(e) === 'gap')
      .map((e) => JSON.parse(e.value).id);
  let hooked: string[] = [];
  await waitFor(
    `the webhooks to catch up (${tag})`,
    async () => {
      const fold = new EventFold(`webhook (${tag})`).add(deliveredTo('/all'));
      hooked = [...fold.violations, ...compareFold(`webhook (${tag})`, fold, tables)].map((v) => v.detail);
      return markersTo('/inserts').includes(marker.id) && hooked.length === 0 ? true : undefined;
    },
    30_000,
  ).catch(() => assert.equal(hooked, [], `${tag}: the webhook's stream`));
  assert.is(markersTo('/inserts').filter((id) => id === marker.id).length, 1, `${tag}: one marker per gap on a webhook, filtered or not`);
  assert.is(markersTo('/all').filter((id) => id === marker.id).length, 1, `${tag}: one marker per gap on a webhook`);
  if (!editsInGap) return;
  // Without the marker the whole stream is not: the gap's edits are missing.
  const blind = new EventFold('rest, markers left out', { midStream: true }).add(stream.filter((e) => kindOf(e) !== 'gap'));
  const wrong = compareFold('markers left out', blind, tables);
  assert.ok(wrong.length > 0, 'the stream without its marker should hold a record the tables lost');
}

test('a slot dropped by hand under a running decoder is replaced, the gap marked and the tables read again', async () => {
  const from = stream.length;
  const slot = await query(server.databaseUrl(database), 'SELECT slot_name FROM pg_replication_slots WHERE slot_name = $1', [database]);
  assert.is(slot.length, 1);
  // As an operator would: end the WAL sender, drop the slot (the decoder may come back between).
  await waitFor(
    'the slot dropped',
    async () => {
      await query(server.adminUrl, 'SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL', [
        database,
      ]);
      try {
        await query(server.adminUrl, 'SELECT pg_drop_replication_slot($1)', [database]);
        return true;
      } catch {
        return undefined;
      }
    },
    10_000,
    20,
  );
  const droppedAt = Date.now();
  await fiveEdits('dropped');
  const gap = await afterGap(from, 'dropped');
  // The decoder may notice before the edits land: they need not fall in the gap.
  await checkGap('dropped', gap, false);
  const noticed = new Date(gap.marker.data.lost_at).getTime() - droppedAt;
  assert.ok(noticed < 15_000, `noticed ${noticed} ms after the drop`);
  assert.is(gap.marker.data.reason, 'missing');
  const seen = await view();
  assert.is(seen.events.slot_gap.id, gap.marker.id);
  assert.is(seen.events.slot_gap.reason, 'missing');
  assert.is(seen.events.slot_gap.backfill_state, 'done');
  assert.ok(seen.events.slot_gap.recovered_at);
  assert.is(seen.status.indicator, 'normal', seen.status.reason);
  // The console says it on the sync's page, and marks the re-read among its backfills.
  const browser = await launchBrowser();
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
    await page.goto(`${svc.api}/`);
    await page.getByLabel('API token', { exact: true }).fill(account.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Syncs' }).waitFor();
    await page.evaluate((id) => (location.hash = `#/syncs/${id}`), syncId);
    const notice = page.locator('.notice', { hasText: 'Replication slot lost' });
    await notice.waitFor();
    const text = (await notice.textContent()) ?? '';
    assert.match(text, /does not exist/);
    assert.ok(text.includes(gap.marker.id) && text.includes(gap.marker.data.backfill), text);
    assert.match(text, /every collection was read again by backfill/);
    await page.getByRole('link', { name: 'Backfills' }).click();
    const row = page.locator(`tr[data-backfill="${gap.marker.data.backfill}"]`);
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', /the re-read after a lost slot/);
  } finally {
    await browser.close();
  }
  const warned = decoder!.logs.lines.map((line) => JSON.parse(line)).filter((e) => e.level === 40 && String(e.msg).startsWith('replication slot lost'));
  assert.is(warned.length, 1, JSON.stringify(warned));
});

test('a slot invalidated past max_slot_wal_keep_size while its decoder was down is replaced the same way', async () => {
  const from = stream.length;
  await decoder!.stop();
  decoder = undefined;
  await fiveEdits('invalidated');
  // More WAL than the bound, elsewhere on the server, then checkpoints: PostgreSQL removes the
  // WAL the idle slot still needs and invalidates it.
  await query(server.adminUrl, 'DROP TABLE IF EXISTS filler');
  await query(server.adminUrl, "CREATE TABLE filler AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 100000) g");
  await waitFor(
    'the slot invalidated',
    async () => {
      await query(server.adminUrl, 'SELECT pg_switch_wal()');
      await query(server.adminUrl, 'CHECKPOINT');
      const [row] = await query<{ wal_status: string }>(server.adminUrl, 'SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1', [database]);
      return row?.wal_status === 'lost' ? true : undefined;
    },
    30_000,
    500,
  );
  decoder = await startDecoder();
  // While the tables are read again, the status says so.
  const during = await waitFor(
    'the status to tell of the gap',
    async () => {
      const v = await view();
      return v.events.slot_gap?.reason === 'invalidated' ? v : undefined;
    },
    30_000,
    50,
  );
  if (during.events.slot_gap.backfill_state !== 'done') {
    assert.is(during.status.indicator, during.events.slot_gap.recovered_at ? 'yellow' : 'red', during.status.reason);
    assert.match(during.status.reason, /^replication slot lost at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(the replication slot .* was invalidated/);
  }
  const gap = await afterGap(from, 'invalidated');
  await checkGap('invalidated', gap, true);
  assert.is(gap.marker.data.reason, 'invalidated');
  const seen = await view();
  assert.is(seen.events.slot_gap.id, gap.marker.id);
  assert.is(seen.status.indicator, 'normal', seen.status.reason);
});

test.run();
