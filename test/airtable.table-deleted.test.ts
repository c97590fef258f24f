/**
 * A table deleted in the Airtable UI while the sync is reading it. Airtable answers a request
 * for a table that no longer exists with the same 403 (INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND)
 * as a key that cannot read the base; the sync must not take it for a bad key (red, a minute's
 * pause, change capture stuck on the payload), but drop the table and go on. Found by the
 * traffic simulation's schema editor.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  loudSetUp,
  request,
  startTestService,
  type TestAccount,
  type TestService,
  waitOk as waitOkOf,
} from './harness/service.ts';

let svc: TestService | undefined;
let account: TestAccount;
let base: FakeBase;
let syncId: string;
let reader: string;

const fields = [
  { name: 'Name', type: 'singleLineText' },
  { name: 'Count', type: 'number', options: { precision: 0 } },
];

async function tables(): Promise<string[]> {
  const rows = await query<{ name: string }>(reader, "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1");
  return rows.map((r) => r.name);
}

async function fatalErrors(): Promise<string[]> {
  const rows = await query<{ message: string }>(svc!.controlUrl, "SELECT message FROM sync_errors WHERE sync_id = $1 AND kind = 'fatal'", [syncId]);
  return rows.map((r) => r.message);
}

const waitOk = () => waitOkOf(svc!, account.token, syncId);

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'] },
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, workerTickMs: 250 },
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Deletions' });
      for (const name of ['Keep', 'Doomed', 'Also doomed']) {
        base.createTable(name, fields);
        base.createRecords(
          name,
          Array.from({ length: 20 }, (_, i) => ({ Name: `${name} ${i}`, Count: i })),
        );
      }
      const created = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(created.status, 201, created.text);
      syncId = created.body.id;
      reader = created.body.database.url;
      await waitFor('the first cycle', async () => ((await tables()).includes('also_doomed') ? true : undefined), 60_000);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
});

test('a table deleted while a cycle lists it: dropped, and the key is not called bad', async () => {
  const doomed = base.table('Doomed');
  // The listing of the table arrives, waits, and is answered after the table is gone.
  svc!.airtable.faults.add({ match: { baseId: base.id, path: new RegExp(`/${doomed.id}/listRecords$`) }, kind: 'delay', delayMs: 1500, times: 1 });
  await waitFor('a cycle to list the table', async () => (svc!.airtable.faults.active === 0 ? true : undefined), 30_000);
  base.deleteTable('Doomed');
  await waitFor('the table to be dropped', async () => (!(await tables()).includes('doomed') ? true : undefined), 30_000);
  await waitOk();
  assert.equal(await fatalErrors(), []);
  const view = await request(svc!.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.is.not(view.body.status.indicator, 'red', view.body.status.last_error ?? '');
});

test('a table deleted right after a change to one of its records: change capture goes on', async () => {
  const keep = base.records('Keep')[0]!;
  const doomed = base.records('Also doomed')[0]!;
  // One payload: a changed record of a table that is gone by the time it is fetched.
  base.updateRecord('Also doomed', doomed.id, { Count: 99 });
  base.deleteTable('Also doomed');
  await waitFor('the table to be dropped', async () => (!(await tables()).includes('also_doomed') ? true : undefined), 30_000);
  // Change capture still brings later changes.
  base.updateRecord('Keep', keep.id, { Count: 1234 });
  await waitFor(
    'a later change',
    async () => {
      const rows = await query<{ count: string }>(reader, 'SELECT count::text FROM public.keep WHERE id = $1', [keep.id]);
      return rows[0]?.count === '1234' ? true : undefined;
    },
    20_000,
  );
  await waitOk();
  assert.equal(await fatalErrors(), []);
  const view = await request(svc!.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
  assert.is(view.body.status.indicator, 'normal', view.body.status.last_error ?? '');
});

test.run();
