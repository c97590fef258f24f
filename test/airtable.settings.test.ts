import { test } from 'uvu';
import * as assert from 'uvu/assert';
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
  const base = svc.airtable.createBase({ name: 'Debounced' });
  base.createTable('Notes', [{ name: 'Text', type: 'singleLineText' }]);
  const [note] = base.createRecords('Notes', [{ Text: 'v0' }]);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN, settings: { debounce_ms: 1500 } },
  });
  assert.is(created.status, 201, created.text);
  const reader = created.body.database.url;
  await waitForCycle(svc, account.token, created.body.id, new Date(Date.now() - 1000));

  const seen = new Set<string>();
  let lastEdit = 0;
  for (const text of ['v1', 'v2', 'v3', 'v4']) {
    base.updateRecord('Notes', note!.id, { Text: text });
    lastEdit = Date.now();
    for (let i = 0; i < 6; i++) {
      const [row] = await query<{ text: string }>(reader, `SELECT text FROM notes WHERE id = '${note!.id}'`);
      seen.add(row!.text);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  let landed = 0;
  for (let i = 0; i < 100 && !landed; i++) {
    const [row] = await query<{ text: string }>(reader, `SELECT text FROM notes WHERE id = '${note!.id}'`);
    seen.add(row!.text);
    if (row!.text === 'v4') landed = Date.now();
    else await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(landed > 0, 'the final value arrived');
  assert.equal([...seen].sort(), ['v0', 'v4'], 'no value in between was written');
  assert.ok(landed - lastEdit >= 1400, `written ${landed - lastEdit} ms after the last edit`);
  assert.ok(landed - lastEdit < 4000, `and not much later (${landed - lastEdit} ms)`);
});

test.run();
