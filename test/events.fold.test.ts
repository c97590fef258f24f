/**
 * The events invariant on a fresh sync: folding the events per record (REST, from offset 0)
 * gives exactly the rows of the database, column by column, for a base of every field type.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readTables } from '../sim/check/canonical.ts';
import { compareFold, foldEvents } from '../sim/check/events.ts';
import { readRestEvents } from '../sim/check/rest-events.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService | undefined;
let account: TestAccount;

test.before(
  loudSetUp(async () => {
    svc = await startTestService({
      config: { roles: ['api', 'sync', 'decoder', 'events'] },
      tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, workerTickMs: 250 },
    });
    account = await createAccount(svc);
  }, () => svc),
);

test.after(async () => {
  await svc?.stop();
});

async function foldAgainstDatabase(syncId: string, readerUrl: string) {
  const answer = await request(svc!.api, 'GET', `/api/wait/${syncId}?timeout=60000`, { token: account.token });
  assert.is(answer.body?.ok, true, answer.text);
  const events = await readRestEvents(
    { restUrl: `http://127.0.0.1:${svc!.service.eventsPort}`, username: account.eventsUsername, password: account.eventsPassword },
    `svc.${syncId}.`,
  );
  const fold = foldEvents('rest', events);
  const database = await readTables(readerUrl);
  return { fold, violations: [...fold.violations, ...compareFold('rest', fold, database)], database };
}

test('a fresh Airtable sync of every field type: the folded events equal the rows', async () => {
  const base = svc!.airtable.base('appCCCCCCCCCCCCCC');
  base.generate({ seed: 21, tables: [{ name: 'Projects', records: 400 }, { name: 'Tasks', records: 300 }] });
  const created = await request(svc!.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: 'appCCCCCCCCCCCCCC', api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  const syncId = created.body.id;
  await waitFor('the first sweep', async () => {
    const view = await request(svc!.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
    return view.body.status.completed_at ? true : undefined;
  }, 120_000);
  const { fold, violations, database } = await foldAgainstDatabase(syncId, created.body.database.url);
  assert.ok(fold.events >= 700, `${fold.events} events`);
  assert.ok(database.size >= 2);
  assert.equal(violations, []);

  // A table renamed and another deleted in the UI: each collection still folds to its table
  // (the renamed one's rows move to the new collection; the deleted one's rows are deleted).
  base.createTable('Scratch', [{ name: 'Name', type: 'singleLineText' }]);
  base.createRecords('Scratch', [{ Name: 'one' }, { Name: 'two' }]);
  await waitFor('the new table', async () => ((await readTables(created.body.database.url)).has('scratch') ? true : undefined), 60_000);
  base.renameTable('Tasks', 'Jobs');
  base.deleteTable('Scratch');
  await waitFor('the rename and the deletion', async () => {
    const tables = await readTables(created.body.database.url);
    return tables.has('jobs') && !tables.has('tasks') && !tables.has('scratch') ? true : undefined;
  }, 60_000);
  const after = await foldAgainstDatabase(syncId, created.body.database.url);
  assert.equal(after.violations, []);
  assert.is(after.fold.rows.get('tasks')?.size ?? 0, 0, 'the old collection folds to nothing');
  assert.is(after.fold.rows.get('jobs')?.size, after.database.get('jobs')!.rows.size);
  assert.is(after.fold.rows.get('scratch')?.size ?? 0, 0);
});

test.run();
