import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { ALL_SCOPES } from '../fakes/airtable/index.ts';
import { waitForCycle } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;

test.before(async () => {
  // Sweeps far apart: what reaches the database here comes through change capture.
  svc = await startTestService({
    config: { roles: ['api', 'sync'] },
    tunables: { airtable: { pollIntervalMs: 100, cycleGapMs: 60_000 }, workerTickMs: 250 },
  });
  account = await createAccount(svc);
});
test.after(async () => svc.stop());

const token = (name: string) => `pat${name.padEnd(14, 'X').slice(0, 14)}.${'ab'.repeat(32)}`;

test('creating a sync checks the key upstream: rejected, no access, missing scope', async () => {
  const base = svc.airtable.createBase({ name: 'Checked' });
  const create = (apiKey: string, baseId = base.id) =>
    request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'airtable', base_id: baseId, api_key: apiKey } });

  const unknown = await create(token('unknown'));
  assert.is(unknown.status, 422);
  assert.match(unknown.body.error.message, /Airtable key was rejected/);

  svc.airtable.addToken(token('otherbase'), { bases: ['appZZZZZZZZZZZZZZ'] });
  const noAccess = await create(token('otherbase'));
  assert.is(noAccess.status, 422);
  assert.match(noAccess.body.error.message, new RegExp(`cannot read base ${base.id}`));

  svc.airtable.addToken(token('noschema'), { bases: '*', scopes: ALL_SCOPES.filter((s) => s !== 'schema.bases:read') });
  const noScope = await create(token('noschema'));
  assert.is(noScope.status, 422);
  assert.match(noScope.body.error.message, /lacks the scope schema\.bases:read/);

  const missingBase = await create(AIRTABLE_TEST_TOKEN, 'appNOSUCHBASE0000');
  assert.is(missingBase.status, 422);

  const ok = await create(AIRTABLE_TEST_TOKEN);
  assert.is(ok.status, 201, ok.text);
  assert.is(ok.body.name, 'Checked', 'the base name is kept for the console');
  assert.equal(await query(svc.controlUrl, 'SELECT count(*)::int AS n FROM syncs'), [{ n: 1 }], 'refused creates left nothing');
});

test('Debounce Updates writes a record once it has been stable for debounce_ms', async () => {
  const debounceMs = 1500;
  const base = svc.airtable.createBase({ name: 'Debounced' });
  base.createTable('Notes', [{ name: 'Text', type: 'singleLineText' }]);
  const [note] = base.createRecords('Notes', [{ Text: 'v0' }]);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN, settings: { debounce_ms: debounceMs } },
  });
  assert.is(created.status, 201, created.text);
  await waitForCycle(svc, account.token, created.body.id, new Date(Date.now() - 1000));

  // Edits 300 ms apart by the clock, read in between on one connection: a loaded machine
  // slows the reads, not the edits (six fresh connections per edit once spaced them past
  // the debounce, and the value they left stable was rightly written).
  const reader = new pg.Client({ connectionString: created.body.database.url });
  await reader.connect();
  const seen = new Map<string, number>();
  const read = async () => {
    const { rows } = await reader.query<{ text: string }>('SELECT text FROM notes WHERE id = $1', [note!.id]);
    if (!seen.has(rows[0]!.text)) seen.set(rows[0]!.text, Date.now());
  };
  const edits: Array<{ text: string; at: number }> = [];
  try {
    for (const text of ['v1', 'v2', 'v3', 'v4']) {
      base.updateRecord('Notes', note!.id, { Text: text });
      edits.push({ text, at: Date.now() });
      const next = Date.now() + 300;
      while (Date.now() < next) {
        await read();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    for (let i = 0; i < 100 && !seen.has('v4'); i++) {
      await read();
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await reader.end();
  }
  assert.ok(seen.has('v4'), 'the final value arrived');
  // A value is written only once it has been still for debounce_ms (give or take the poll):
  // the in-between values, each replaced within well under that, never are.
  const last = edits.at(-1)!;
  for (const [index, edit] of edits.slice(0, -1).entries()) {
    const stillFor = edits[index + 1]!.at - edit.at;
    assert.ok(stillFor < debounceMs - 500, `the test's edits came ${stillFor} ms apart`);
    assert.not.ok(seen.has(edit.text), `${edit.text}, replaced after ${stillFor} ms, was written`);
  }
  const landed = seen.get('v4')! - last.at;
  assert.ok(landed >= debounceMs - 100, `written ${landed} ms after the last edit`);
  assert.ok(landed < debounceMs + 2500, `and not much later (${landed} ms)`);
});

test.run();
