/**
 * The events invariant on a fresh sync: folding the events per record (REST, from offset 0)
 * gives exactly the rows of the database, column by column, for a base of every field type,
 * and still does after tables and fields are added, renamed, retyped and removed.
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
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'] },
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, workerTickMs: 250 },
      });
      account = await createAccount(svc);
    },
    () => svc,
  ),
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
  base.generate({
    seed: 21,
    tables: [
      { name: 'Projects', records: 400 },
      { name: 'Tasks', records: 300 },
    ],
  });
  const created = await request(svc!.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: 'appCCCCCCCCCCCCCC', api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  const syncId = created.body.id;
  await waitFor(
    'the first sweep',
    async () => {
      const view = await request(svc!.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
      return view.body.status.completed_at ? true : undefined;
    },
    120_000,
  );
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
  await waitFor(
    'the rename and the deletion',
    async () => {
      const tables = await readTables(created.body.database.url);
      return tables.has('jobs') && !tables.has('tasks') && !tables.has('scratch') ? true : undefined;
    },
    60_000,
  );
  const after = await foldAgainstDatabase(syncId, created.body.database.url);
  assert.equal(after.violations, []);
  assert.is(after.fold.rows.get('tasks')?.size ?? 0, 0, 'the old collection folds to nothing');
  assert.is(after.fold.rows.get('jobs')?.size, after.database.get('jobs')!.rows.size);
  assert.is(after.fold.rows.get('scratch')?.size ?? 0, 0);
});

test('a field added, renamed, retyped and removed under edits: every collection still folds to its table', async () => {
  const base = svc!.airtable.createBase({ name: 'Shifting' });
  base.createTable('Items', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Label', type: 'singleLineText' },
    { name: 'Qty', type: 'number', options: { precision: 0 } },
    { name: 'Done', type: 'checkbox' },
  ]);
  base.createRecords(
    'Items',
    Array.from({ length: 8 }, (_, i) => ({ Name: `item ${i}`, Label: i % 2 ? `label ${i}` : undefined, Qty: i, Done: i % 3 === 0 })),
  );
  const created = await request(svc!.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  const syncId = created.body.id;
  const reader = created.body.database.url as string;
  await waitFor(
    'the first sweep',
    async () => {
      const view = await request(svc!.api, 'GET', `/api/syncs/${syncId}`, { token: account.token });
      return view.body.status.completed_at ? true : undefined;
    },
    60_000,
  );

  // A field added and five records given a value in it at once, as in the UI.
  base.addField('Items', { name: 'Note', type: 'singleLineText' });
  const records = base.records('Items');
  for (const record of records.slice(0, 5)) base.updateRecord('Items', record.id, { Note: `note ${record.fields.Name}` });
  await waitFor(
    'the note column filled',
    async () => {
      const rows = await readTables(reader).then((t) => t.get('items'));
      return rows?.columns.has('note') && [...rows.rows.values()].filter((r) => r.get('note') !== null).length === 5 ? true : undefined;
    },
    60_000,
  );
  const added = await foldAgainstDatabase(syncId, reader);
  assert.equal(added.violations, []);
  assert.equal([...added.fold.rows.get('items')!.values()].filter((r) => r.note).length, 5, 'the five values are in the events');

  // A rename, a retype (number → text) and a removal, each with an edit beside it.
  base.renameField('Items', 'Label', 'Tag');
  base.retypeField('Items', 'Qty', 'singleLineText');
  base.deleteField('Items', 'Done');
  base.updateRecord('Items', records[1]!.id, { Name: 'renamed at once' });
  await waitFor(
    'the new shape',
    async () => {
      const columns = (await readTables(reader)).get('items')?.columns;
      return columns?.has('tag') && !columns.has('label') && !columns.has('done') && columns.get('qty') === 25 ? true : undefined;
    },
    60_000,
  );
  const shifted = await foldAgainstDatabase(syncId, reader);
  assert.equal(shifted.violations, []);
  const folded = shifted.fold.rows.get('items')!.get(records[1]!.id)!;
  assert.equal(folded, { ...folded, tag: 'label 1', qty: '1', name: 'renamed at once' });
  assert.not.ok('done' in folded || 'label' in folded, JSON.stringify(folded));
});

test.run();
