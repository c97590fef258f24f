/**
 * A replication slot keeping WAL, seen from outside. The sync's server runs with a small bound
 * (max_slot_wal_keep_size 64 MB) as the service runs its own; a transaction left open in the
 * sync's database holds the slot's restart point back (the decoder cannot move past a change
 * that may still commit), and the server writes WAL elsewhere. The sync turns yellow with the
 * slot's reason, `GET /api/syncs/:id` and the metrics give the figures, and once the
 * transaction ends the slot lets go and the status is `normal` again. Before, nothing read
 * what a slot keeps: the status said `normal` while the disk filled.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { withDatabase } from '../src/db/sql.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { startSecondServer, type SecondServer } from './harness/second-server.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const MB = 1024 * 1024;
let server: SecondServer;
let svc: TestService;
let account: TestAccount;
let base: FakeBase;
let syncId: string;
let database: string;

test.before(
  loudSetUp(
    async () => {
      server = await startSecondServer({ slotWalKeepMb: 64 });
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'], targetDatabaseUrl: server.adminUrl },
        airtable: { rateLimit: false },
        tunables: {
          status: { slotYellowShare: 0.3 },
          airtable: { pollIntervalMs: 500, cycleGapMs: 2000 },
          decoder: { lagReportMs: 500, lagRewriteMs: 3000 },
          workerTickMs: 200,
        },
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Retention' });
      base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords('Tasks', [{ Name: 'one' }]);
      const sync = await createAirtableSync(svc, account, base.id);
      syncId = sync.id;
      database = new URL(sync.adminUrl).pathname.slice(1);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await server?.stop();
});

const view = async () => (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body;

test('a slot past half its bound turns the sync yellow with the figures; it is normal again once it lets go', async () => {
  const first = await waitFor(
    'the first report of the slot',
    async () => ((await view()).events.slot_retained_bytes !== null ? await view() : undefined),
    30_000,
  );
  assert.is(first.status.indicator, 'normal', first.status.reason);
  assert.ok(first.events.slot_safe_bytes > 0, `the server has a bound: ${first.events.slot_safe_bytes}`);

  // An open transaction that wrote in the sync's database: the slot's restart point stays before it.
  const holder = new pg.Client({ connectionString: withDatabase(server.adminUrl, database) });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('CREATE TABLE held_open (a int)');
    // About 38 MB of WAL elsewhere on the server: over half of the 64 MB bound, short of all of it (a checkpoint would then lose the slot).
    await query(server.adminUrl, "CREATE TABLE filler AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 35000) g");
    let last: any;
    const yellow = await waitFor(
      'the slot to turn the sync yellow',
      async () => {
        last = await view();
        return last.status.indicator === 'yellow' ? last : undefined;
      },
      30_000,
    ).catch(async (error) => {
      const slots = await query(
        server.adminUrl,
        'SELECT slot_name, restart_lsn::text, confirmed_flush_lsn::text, wal_status, safe_wal_size, pg_current_wal_lsn()::text AS now FROM pg_replication_slots',
      );
      throw new Error(
        `${(error as Error).message}: the sync showed ${JSON.stringify({ status: last?.status, events: last?.events })}; the server's slots ${JSON.stringify(slots)}`,
      );
    });
    assert.match(yellow.status.reason, /^replication slot holding \d+ MB of WAL, \d+ % of what the server lets it keep \(max_slot_wal_keep_size\)/);
    // The share is shortened to 0.3: PostgreSQL counts what is still safe by whole WAL segments, past the bound itself.
    assert.ok(yellow.events.slot_retained_bytes >= 20 * MB, `${yellow.events.slot_retained_bytes} bytes kept`);
    assert.ok(['reserved', 'extended'].includes(yellow.events.slot_wal_status), yellow.events.slot_wal_status);
    const metrics = (await request(svc.api, 'GET', '/metrics', { token: svc.adminToken })).text;
    const share = Number(new RegExp(`tributary_sync_slot_wal_bound_share\\{sync_id="${syncId}",kind="airtable"\\} ([0-9.]+)`).exec(metrics)?.[1]);
    assert.ok(share >= 0.3 && share <= 1, `share in the metrics: ${share}`);
    assert.match(metrics, new RegExp(`tributary_sync_slot_retained_wal_bytes\\{sync_id="${syncId}",kind="airtable"\\} \\d+`));
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
  // The server notes its running transactions at least every 15 s; the slot moves on with it.
  await query(server.adminUrl, 'CHECKPOINT');
  const normal = await waitFor(
    'the status to be normal again',
    async () => {
      const v = await view();
      return v.status.indicator === 'normal' ? v : undefined;
    },
    60_000,
  );
  assert.ok(normal.events.slot_retained_bytes < 20 * MB, `${normal.events.slot_retained_bytes} bytes kept after`);
});

test.run();
