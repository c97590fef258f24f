/**
 * A runner that starts on a sync already built (a restart, or a worker taking over a dead
 * one's syncs) reads the payloads made while no runner ran. A record deleted meanwhile is
 * deleted at once, even when change capture reads the payloads before the cycle has loaded
 * the tables it knows: the sweep cannot make up for it while the record is younger than its
 * clock margin (a minute), so a dropped deletion stayed for that long.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitForCycle, waitForRows } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestService } from './harness/service.ts';

const TUNABLES = { airtable: { pollIntervalMs: 200, pacedCycleMs: 0 }, workerTickMs: 100 };
let first: TestService;
let second: TestService | undefined;

test.before(async () => {
  first = await startTestService({ config: { roles: ['api', 'sync'] }, airtable: { rateLimit: false }, tunables: TUNABLES });
});

test.after(async () => {
  await second?.stop();
  // The first service was stopped by the test; its fakes were not.
  await first?.airtable.close();
  await first?.stripe?.close();
});

test('a record deleted while no runner ran is deleted as the next runner starts', async () => {
  const account = await createAccount(first);
  const base = first.airtable.createBase({ name: 'Taken over' });
  base.createTable('Tasks', [{ name: 'Name', type: 'singleLineText' }]);
  const [kept, doomed] = base.createRecords('Tasks', [{ Name: 'kept' }, { Name: 'doomed' }]);
  const created = await request(first.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  const reader = created.body.database.url as string;
  await waitForCycle(first, account.token, created.body.id, new Date());

  // The runner stops (the fake stays), and the record goes while none runs.
  await first.service.stop();
  base.deleteRecords('Tasks', [doomed!.id]);
  base.updateRecord('Tasks', kept!.id, { Name: 'kept, edited' });

  // The next runner's schema read is slow, so its first capture polls come before the cycle knows its tables.
  first.airtable.faults.add({ match: { method: 'GET', path: /\/meta\/bases\/[^/]+\/tables$/ }, kind: 'delay', delayMs: 2000 });
  second = await startTestService({
    config: {
      roles: ['api', 'sync'],
      databaseUrl: first.controlUrl,
      adminToken: first.adminToken,
      dataDir: first.dataDir,
      upstreams: new Map([['api.airtable.com', first.airtable.url]]),
    },
    tunables: TUNABLES,
  });
  const startedAt = Date.now();
  await waitForRows(reader, `SELECT 1 FROM tasks WHERE name = 'kept, edited'`, (rows) => rows.length === 1);
  const gone = await waitForRows(reader, `SELECT id FROM tasks WHERE id = '${doomed!.id}'`, (rows) => rows.length === 0, 15_000).catch(() => undefined);
  const left = await query(reader, 'SELECT id FROM tasks WHERE id = $1', [doomed!.id]);
  assert.equal(left, [], `the deleted record was still there ${((Date.now() - startedAt) / 1000).toFixed(1)} s after the runner started`);
  assert.ok(gone);
});

test.run();
