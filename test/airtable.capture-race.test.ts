/**
 * A sweep page and change capture crossing: the page is made before a record is deleted in
 * Airtable and arrives after change capture has deleted the row. The page's copy of the
 * record must not bring it back, not even until the next cycle.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { waitForCycle } from './harness/airtable.ts';
import { waitFor } from './harness/process.ts';
import { query } from './harness/postgres.ts';
import { raceSetUp, type TestProxy } from './harness/proxy.ts';
import { loudSetUp, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let base: FakeBase;
let proxy: TestProxy;
let reader: string;
let syncId: string;

/**
 * How late the sweep's page arrives: change capture (polling every 200 ms) deletes the row well
 * before. It was 2 s, and in a fresh-clone run (five files at once) capture took longer than
 * that: its polls are plain sync requests in the base's 3 a second, beside the cycles' own.
 */
const LATE_MS = 6000;

test.before(
  loudSetUp(
    async () => {
      ({ svc, account, base, syncId, reader, proxy } = await raceSetUp(
        { airtable: { pollIntervalMs: 200, cycleGapMs: 200, pacedCycleMs: 0 }, workerTickMs: 100 },
        [{ Name: 'Seed', Count: 0 }],
      ));
    },
    () => svc,
  ),
);

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
});

test('a record change capture deleted is not brought back by a sweep page made before the delete', async () => {
  const [made] = base.createRecords('Tasks', [{ Name: 'Doomed', Count: 5 }]);
  const id = made!.id;
  const present = async () => (await query(reader, 'SELECT 1 FROM tasks WHERE id = $1', [id])).length > 0;
  await waitFor('the record to be synced', async () => ((await present()) ? true : undefined), 20_000);
  await waitForCycle(svc, account.token, syncId, new Date());

  // The next sweep page is made now (listing the record) and sent LATE_MS later.
  svc.airtable.faults.add({ match: { method: 'POST', path: /\/listRecords$/ }, kind: 'lateAnswer', delayMs: LATE_MS });
  await waitFor('the sweep to ask for a page', async () => (svc.airtable.faults.active === 0 ? true : undefined), 20_000);
  base.deleteRecords('Tasks', [id]);
  const deletedAt = Date.now();
  await waitFor('change capture to delete the row', async () => ((await present()) ? undefined : true), LATE_MS);
  const seen: boolean[] = [];
  for (const end = deletedAt + LATE_MS + 2000; Date.now() < end; ) {
    seen.push(await present());
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(!seen.includes(true), `the deleted record came back in ${seen.filter(Boolean).length} of ${seen.length} reads`);
});

test.run();
