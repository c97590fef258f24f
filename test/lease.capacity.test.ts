/**
 * One process runs at most TRIBUTARY_MAX_SYNCS_PER_PROCESS syncs. The ones past it wait for
 * another process, and the log says so (a cap of 200 was once hard-coded and silent: a
 * machine of 250 syncs left 50 never started, with nothing anywhere to show it). A sync made
 * ready is claimed at once, by a notification, not at the workers' next tick.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../src/config.ts';
import { DEFAULT_MAX_SYNCS } from '../src/lease/worker.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, airtableSyncBody, createAccount, request, startTestService, type TestService } from './harness/service.ts';

let svc: TestService;

test.before(async () => {
  svc = await startTestService({ config: { roles: ['api', 'sync'], maxSyncsPerProcess: 2 }, tunables: { workerTickMs: 200 } });
});
test.after(async () => svc.stop());

test('past its maximum a process leaves syncs to another and says so; a free place is taken', async () => {
  const account = await createAccount(svc);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const base = svc.airtable.createBase({ name: `Capped ${i}` });
    base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
    const created = await request(svc.api, 'POST', '/api/syncs', {
      token: account.token,
      body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
    });
    assert.is(created.status, 201, created.text);
    ids.push(created.body.id);
  }
  const started = async () => {
    const views = await Promise.all(ids.map((id) => request(svc.api, 'GET', `/api/syncs/${id}`, { token: account.token })));
    return views.filter((v) => v.status === 200 && v.body.status.started_at !== null).map((v) => v.body.id as string);
  };
  await waitFor('two started', async () => ((await started()).length === 2 ? true : undefined), 20_000);
  await waitFor(
    'the warning',
    async () => (svc.logs.lines.some((l) => l.includes('runs its maximum of syncs') && l.includes('"waiting":1')) ? true : undefined),
    10_000,
  );
  assert.is((await started()).length, 2, 'the third waits');
  const running = await started();
  assert.is((await request(svc.api, 'DELETE', `/api/syncs/${running[0]}`, { token: account.token })).status < 300, true);
  const waiting = ids.find((id) => !running.includes(id))!;
  await waitFor('the waiting one started', async () => ((await started()).includes(waiting) ? true : undefined), 20_000);
});

test('a new sync starts at once, not at the next claim tick', async () => {
  // A tick a minute: only the notification of the sync made ready can start it within seconds.
  const slow = await startTestService({ config: { roles: ['api', 'sync'] }, tunables: { workerTickMs: 60_000 } });
  try {
    const account = await createAccount(slow);
    const base = slow.airtable.createBase({ name: 'At once' });
    base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
    const created = await request(slow.api, 'POST', '/api/syncs', { token: account.token, body: airtableSyncBody(base.id) });
    assert.is(created.status, 201, created.text);
    const at = Date.now();
    await waitFor(
      'the sync started',
      async () => ((await request(slow.api, 'GET', `/api/syncs/${created.body.id}`, { token: account.token })).body.status.started_at ? true : undefined),
      20_000,
    );
    assert.ok(Date.now() - at < 5000, `started ${Date.now() - at} ms after it was made`);
  } finally {
    await slow.stop();
  }
});

test('the maximum comes from TRIBUTARY_MAX_SYNCS_PER_PROCESS; a bad value stops the start', () => {
  const env = { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db', TRIBUTARY_SECRET_KEY: 'k'.repeat(64) };
  assert.is(loadConfig(env).maxSyncsPerProcess, DEFAULT_MAX_SYNCS);
  assert.is(loadConfig({ ...env, TRIBUTARY_MAX_SYNCS_PER_PROCESS: '300' }).maxSyncsPerProcess, 300);
  assert.throws(() => loadConfig({ ...env, TRIBUTARY_MAX_SYNCS_PER_PROCESS: '0' }), /TRIBUTARY_MAX_SYNCS_PER_PROCESS must be a whole number of at least 1/);
});

test.run();
