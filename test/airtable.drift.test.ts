/**
 * An Airtable sync's sweeps count what change capture had not brought (docs/airtable.md#drift):
 * a sweep of an unchanged base finds nothing; rows changed in the database behind the sync's
 * back (one deleted, one altered, one added) are put right by the next sweep and counted as
 * missing, differing and extra for their table, in the status and the metrics.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { createAccount, createAirtableSync, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let base: FakeBase;
let sync: { id: string; readerUrl: string; adminUrl: string };

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'] },
        tunables: { airtable: { pollIntervalMs: 300, cycleGapMs: 500, pacedCycleMs: 0 }, workerTickMs: 200 },
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Drift' });
      base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
      base.createRecords(
        'Tasks',
        Array.from({ length: 20 }, (_, i) => ({ Name: `task ${i}` })),
      );
      sync = await createAirtableSync(svc, account, base.id);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

const view = async () => (await request(svc.api, 'GET', `/api/syncs/${sync.id}`, { token: account.token })).body;

/** The table's entry once a sweep that began after `from` compared it. */
async function comparedAfter(from: number): Promise<{ drift: any; tasks: any }> {
  return waitFor(
    'a sweep of the table after now',
    async () => {
      const drift = (await view()).drift;
      const tasks = drift.tables.find((t: any) => t.table === 'tasks');
      return tasks?.compared_at && Date.parse(tasks.compared_at) >= from ? { drift, tasks } : undefined;
    },
    60_000,
    200,
  );
}

test('a sweep of an unchanged base finds nothing', async () => {
  const { drift, tasks } = await comparedAfter(Date.now());
  assert.equal(tasks, { table: 'tasks', compared_at: tasks.compared_at, missing: 0, differing: 0, extra: 0 });
  assert.equal(drift.last_24h, { missing: 0, differing: 0, extra: 0 });
  assert.is(drift.audit, null, 'no audit: the sweeps compare');
});

test('rows changed behind the sync are put right by the next sweep, and counted by kind', async () => {
  const [gone, altered] = base.records('Tasks');
  await query(sync.adminUrl, 'DELETE FROM tasks WHERE id = $1', [gone!.id]);
  await query(sync.adminUrl, "UPDATE tasks SET name = 'changed by hand' WHERE id = $1", [altered!.id]);
  await query(sync.adminUrl, "INSERT INTO tasks (id, created_time, name) VALUES ('recEXTRAEXTRAEXTR', now() - interval '1 day', 'not upstream')");
  const { drift, tasks } = await comparedAfter(Date.now());
  assert.equal({ missing: tasks.missing, differing: tasks.differing, extra: tasks.extra }, { missing: 1, differing: 1, extra: 1 });
  assert.equal(drift.last_24h, { missing: 1, differing: 1, extra: 1 });
  const rows = await query<{ id: string; name: string }>(sync.readerUrl, 'SELECT id, name FROM tasks ORDER BY id');
  assert.equal(
    rows,
    base
      .records('Tasks')
      .map((r) => ({ id: r.id, name: r.fields.Name as string }))
      .sort((a, b) => (a.id < b.id ? -1 : 1)),
  );
  // Summed for the sync: an Airtable base's table names are the customer's, never a metric label.
  const metrics = await request(svc.api, 'GET', '/metrics', { token: svc.adminToken });
  assert.match(metrics.text, new RegExp(`tributary_sync_drift_rows\\{sync_id="${sync.id}",table="",drift="missing"\\} 1\\n`));
});

test('the count survives later sweeps that find nothing', async () => {
  const { tasks } = await comparedAfter(Date.now());
  assert.equal({ missing: tasks.missing, differing: tasks.differing, extra: tasks.extra }, { missing: 1, differing: 1, extra: 1 });
});

test('drift older than a week is pruned by the sweeps, as by the audit', async () => {
  await query(
    svc.controlUrl,
    "INSERT INTO sync_drift (sync_id, tbl, source, differing, found_at) VALUES ($1, 'tasks', 'sweep', 5, now() - interval '8 days')",
    [sync.id],
  );
  await comparedAfter(Date.now());
  const old = await query(svc.controlUrl, "SELECT 1 FROM sync_drift WHERE sync_id = $1 AND found_at < now() - interval '7 days'", [sync.id]);
  assert.equal(old, [], 'a week-old row is gone');
  const kept = await query(svc.controlUrl, 'SELECT 1 FROM sync_drift WHERE sync_id = $1', [sync.id]);
  assert.ok(kept.length > 0, "the last day's drift is kept");
});

test.run();
