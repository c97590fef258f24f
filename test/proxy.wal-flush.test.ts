/**
 * A proxied write reaches the event stream at once, not at the WAL writer's next round. The
 * proxy commits asynchronously (the client does not wait for the disk), and the decoder is
 * sent only WAL that is on disk: on a quiet sync a proxied create reached its webhook 0–600 ms
 * later (p99 190–300 ms with the default 200 ms wal_writer_delay). The proxy now flushes the
 * WAL behind its write. This server's WAL writer waits 10 s between rounds, and nothing else
 * writes to it, so without that flush each change would wait seconds.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { type SecondServer, startSecondServer } from './harness/second-server.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  createAirtableSync,
  loudSetUp,
  request,
  startTestService,
  TEST_BASES,
  type TestService,
} from './harness/service.ts';

let server: SecondServer;
let svc: TestService;
let syncId: string;
let tableId: string;

test.before(
  loudSetUp(
    async () => {
      server = await startSecondServer();
      await query(server.adminUrl, "ALTER SYSTEM SET wal_writer_delay = '10s'");
      await query(server.adminUrl, 'SELECT pg_reload_conf()');
      svc = await startTestService({
        config: { roles: ['api', 'proxy', 'sync', 'decoder', 'events'], targetDatabaseUrl: server.adminUrl },
        // The sync reads the base once and then stays quiet: its own writes would flush the WAL too.
        tunables: { airtable: { pollIntervalMs: 600_000, cycleGapMs: 600_000 } },
      });
      const base = svc.airtable.base(TEST_BASES[0]!);
      tableId = base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]).id;
      base.createRecords('Tasks', [{ Name: 'first' }]);
      const account = await createAccount(svc, 'flush');
      syncId = (await createAirtableSync(svc, account, TEST_BASES[0]!)).id;
    },
    () => svc,
  ),
);
test.after(async () => {
  await svc?.stop();
  await server?.stop();
});

test("each proxied create is in the event log long before the WAL writer's next round", async () => {
  const [delay] = await query<{ wal_writer_delay: string }>(server.adminUrl, 'SHOW wal_writer_delay');
  assert.is(delay!.wal_writer_delay, '10s');
  // Without the flush each change waits for the WAL writer, 0–10 s: five all under 3 s by
  // chance is 0.3⁵, a quarter of one percent. (The bound was a second; beside a burnt core a
  // flushed change once took 1.2 s.)
  for (let i = 0; i < 5; i++) {
    const created = await request(`http://127.0.0.1:${svc.service.proxyPort}`, 'POST', `/api.airtable.com/v0/${TEST_BASES[0]}/${tableId}`, {
      token: AIRTABLE_TEST_TOKEN,
      body: { fields: { Name: `flushed ${i}` } },
    });
    assert.is(created.status, 200, created.text);
    const answered = Date.now();
    await waitFor(
      `the event of proxied create ${i}`,
      async () => {
        const rows = await query(svc.controlUrl, 'SELECT 1 FROM events WHERE sync_id = $1 AND record_id = $2', [syncId, created.body.id]);
        return rows.length > 0 ? true : undefined;
      },
      15_000,
      20,
    );
    const took = Date.now() - answered;
    assert.ok(took < 3_000, `proxied create ${i} reached the event log ${took} ms after its answer`);
  }
});

test.run();
