import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitForCycle, waitForRows } from './harness/airtable.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestService } from './harness/service.ts';

let svc: TestService;

test.before(async () => {
  // Webhooks that live 4 s: the sync must keep refreshing its own.
  svc = await startTestService({
    config: { roles: ['api', 'sync'] },
    tunables: { airtable: { pollIntervalMs: 400, cycleGapMs: 300 }, workerTickMs: 250 },
    airtable: { webhookTtlMs: 4000 },
  });
});
test.after(async () => svc.stop());

const webhooks = async (baseId: string) =>
  (
    (await (await fetch(`${svc.airtable.url}/v0/bases/${baseId}/webhooks`, { headers: { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}` } })).json()) as {
      webhooks: Array<{ id: string; expirationTime: string }>;
    }
  ).webhooks;

test('the sync refreshes its webhook before it expires, and changes keep flowing', async () => {
  const account = await createAccount(svc);
  const base = svc.airtable.createBase({ name: 'Refreshed' });
  base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  await waitForCycle(svc, account.token, created.body.id, new Date(Date.now() - 1000));
  const [first] = await webhooks(base.id);
  assert.ok(first, 'a webhook exists');

  // Three lifetimes later the same webhook is still there, with a later expiry.
  await new Promise((r) => setTimeout(r, 10_000));
  const [later] = await webhooks(base.id);
  assert.is(later?.id, first!.id, 'refreshed, not replaced');
  assert.ok(Date.parse(later!.expirationTime) > Date.parse(first!.expirationTime));

  const [item] = base.createRecords('Items', [{ Name: 'after refreshes' }]);
  const arrived = await waitForRows(created.body.database.url, `SELECT 1 FROM items WHERE id = '${item!.id}'`, (r) => r.length === 1);
  assert.ok(arrived.ms < 5000, `arrived in ${arrived.ms} ms`);
});

test.run();
