/**
 * A fetch by id and change capture crossing: a debounced edit's fetch is made before the
 * record is deleted in Airtable and answered after change capture has deleted the row. Its
 * copy must not bring the record back; a sweep would not take it away again either, since
 * it keeps what was created in the minute before its listing. Found by the traffic
 * simulation (records deleted upstream, still in the database).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { waitForCycle } from './harness/airtable.ts';
import { waitFor } from './harness/process.ts';
import { query } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, loudSetUp, request, startTestService, type TestService } from './harness/service.ts';

let svc: TestService;
let base: FakeBase;
let reader: string;

/** How late the fetch's answer arrives: change capture (polling every 200 ms) deletes the row well before. */
const LATE_MS = 2000;

test.before(
  loudSetUp(
    async () => {
      // No sweep after the first: the late answer below is the debounced fetch's.
      svc = await startTestService({
        config: { roles: ['api', 'sync'] },
        airtable: { rateLimit: false },
        tunables: { airtable: { pollIntervalMs: 200, cycleGapMs: 600_000, pacedCycleMs: 0 }, workerTickMs: 100 },
      });
      const account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Delete race' });
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Count', type: 'number', options: { precision: 0 } },
      ]);
      const before = new Date();
      const created = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN, settings: { debounce_ms: 300 } },
      });
      assert.is(created.status, 201, created.text);
      reader = created.body.database.url;
      await waitForCycle(svc, account.token, created.body.id, before);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

test('a record deleted while its debounced fetch is on its way back is not written back by it', async () => {
  const [made] = base.createRecords('Tasks', [{ Name: 'Edited then deleted', Count: 1 }]);
  const id = made!.id;
  const present = async () => (await query(reader, 'SELECT 1 FROM tasks WHERE id = $1', [id])).length > 0;
  await waitFor('the record to be synced', async () => ((await present()) ? true : undefined), 20_000);

  // The edit's fetch by id, once debounced, is made at once and answered LATE_MS later.
  svc.airtable.faults.add({ match: { method: 'POST', path: /\/listRecords$/ }, kind: 'lateAnswer', delayMs: LATE_MS });
  base.updateRecord('Tasks', id, { Count: 2 });
  await waitFor('the debounced fetch to be made', async () => (svc.airtable.faults.active === 0 ? true : undefined), 20_000);
  base.deleteRecords('Tasks', [id]);
  const deletedAt = Date.now();
  await waitFor('change capture to delete the row', async () => ((await present()) ? undefined : true), LATE_MS + 5_000);
  const seen: boolean[] = [];
  for (const end = deletedAt + LATE_MS + 2000; Date.now() < end; ) {
    seen.push(await present());
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(!seen.includes(true), `the deleted record came back in ${seen.filter(Boolean).length} of ${seen.length} reads`);
});

test.run();
