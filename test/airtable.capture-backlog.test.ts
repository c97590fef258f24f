/**
 * A backlog of more changes than one read of the webhook's payloads takes (20 pages of 50),
 * as an outage of the service or of its database leaves behind. The poll used to apply the
 * first thousand, count itself a pass and answer the wait with `ok` while the rest were still
 * at Airtable. A wait's `ok` must cover every change made before it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { query } from './harness/postgres.ts';
import { createAccount, createAirtableSync, loudSetUp, startTestService, type TestAccount, type TestService, waitOk } from './harness/service.ts';

let svc: TestService;
let base: FakeBase;
let account: TestAccount;
let syncId: string;
let reader: string;

const CHANGES = 1100;

test.before(
  loudSetUp(
    async () => {
      // Polls only when asked (a wait), and no sweep after the first: the wait's poll alone must bring every change.
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'] },
        airtable: { rateLimit: false },
        tunables: { airtable: { pollIntervalMs: 600_000, cycleGapMs: 600_000, pacedCycleMs: 0 }, workerTickMs: 100 },
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Backlog' });
      base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
      ({ id: syncId, readerUrl: reader } = await createAirtableSync(svc, account, base.id));
      await waitOk(svc, account.token, syncId);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

test("a wait's ok covers a backlog longer than one read of the payloads", async () => {
  // One transaction, so one payload, each.
  for (let i = 0; i < CHANGES; i++) base.createRecords('Tasks', [{ Name: `change ${i}` }]);
  await waitOk(svc, account.token, syncId, 60_000);
  const [row] = await query<{ n: number }>(reader, 'SELECT count(*)::int AS n FROM tasks');
  assert.is(row!.n, CHANGES, 'every record made before the wait is in the database when it answers ok');
});

test.run();
