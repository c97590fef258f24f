/**
 * A row the base no longer holds, of a record made in the minute before a sweep's listing
 * began. The listing cannot prove it gone (a record made after the listing started is missing
 * from it too), so the sweep used to keep it until a sweep a minute later: seen in the traffic
 * simulation as two records deleted upstream that stayed in the database past a complete
 * sweep, when change capture had not brought their deletion. Now the sweep hands such rows to
 * a fetch by id, which deletes those Airtable no longer has, and keeps those it has.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { waitForCycle, waitForRows } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { createAccount, createAirtableSync, loudSetUp, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let base: FakeBase;
let admin: string;
let account: TestAccount;
let syncId: string;

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync'] },
        airtable: { rateLimit: false },
        tunables: { airtable: { pollIntervalMs: 200, cycleGapMs: 500, pacedCycleMs: 0 }, workerTickMs: 100 },
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Unproven rows' });
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Count', type: 'number', options: { precision: 0 } },
      ]);
      base.createRecords('Tasks', [{ Name: 'kept', Count: 1 }]);
      ({ id: syncId, adminUrl: admin } = await createAirtableSync(svc, account, base.id));
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

test('a fresh row the base no longer holds is gone after the next sweep; a fresh one it holds stays', async () => {
  // As a lost deletion leaves it: a row made seconds ago whose record Airtable does not have.
  await query(admin, `INSERT INTO tasks (id, created_time, name) VALUES ('recGONEUPSTREAM01', now(), 'stale')`);
  const [fresh] = base.createRecords('Tasks', [{ Name: 'fresh', Count: 2 }]);
  const after = new Date();
  await waitForCycle(svc, account.token, syncId, after, 20_000);
  const { rows, ms } = await waitForRows<{ id: string; name: string }>(
    admin,
    'SELECT id, name FROM tasks ORDER BY name',
    (rows) => !rows.some((r) => r.id === 'recGONEUPSTREAM01'),
    10_000,
  );
  assert.equal(
    rows.map((r) => r.name),
    ['fresh', 'kept'],
  );
  assert.ok(rows.some((r) => r.id === fresh!.id));
  assert.ok(ms < 10_000, `${ms} ms after the sweep`);
});

test.run();
