/**
 * Airtable's webhook pings (TRIBUTARY_PUBLIC_URL set): the sync's webhook pings our /hooks
 * route, a signed ping makes the runner read the payloads at once, and between pings the
 * runner reads only every pingedPollIntervalMs, so an idle base costs a tenth of the requests.
 * A forged ping is refused and wakes nothing; a base whose pings fail is polled every second.
 */
import { createHmac } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitForCycle, waitForRows } from './harness/airtable.ts';
import { withClient } from '../src/db/sql.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { freePort } from './harness/ports.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, airtableSyncBody, createAccount, request, startTestService, type TestService } from './harness/service.ts';

let svc: TestService;
let apiPort: number;
const PINGED_POLL_MS = 6000;

test.before(async () => {
  apiPort = await freePort();
  svc = await startTestService({
    config: { roles: ['api', 'sync'], apiPort, publicOrigin: `http://127.0.0.1:${apiPort}` },
    tunables: { airtable: { pollIntervalMs: 500, pingedPollIntervalMs: PINGED_POLL_MS, cycleGapMs: 60_000 }, workerTickMs: 250 },
  });
});
test.after(async () => svc.stop());

interface ListedHook {
  id: string;
  notificationUrl: string | null;
  lastNotificationResult: { success: boolean } | null;
}
const webhooks = async (baseId: string) =>
  (
    (await (await fetch(`${svc.airtable.url}/v0/bases/${baseId}/webhooks`, { headers: { authorization: `Bearer ${AIRTABLE_TEST_TOKEN}` } })).json()) as {
      webhooks: ListedHook[];
    }
  ).webhooks;

async function syncedBase(name: string, on = svc) {
  const account = await createAccount(on);
  const base = on.airtable.createBase({ name });
  base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
  const created = await request(on.api, 'POST', '/api/syncs', { token: account.token, body: airtableSyncBody(base.id) });
  assert.is(created.status, 201, created.text);
  await waitForCycle(on, account.token, created.body.id, new Date(Date.now() - 1000));
  return { base, syncId: created.body.id as string, url: created.body.database.url as string };
}

/** The webhook payload reads of a base over `ms`: GET …/payloads through the fake's own request count. */
async function payloadReadsOver(baseId: string, ms: number): Promise<number> {
  const before = svc.airtable.stats.byBase(baseId).requests;
  await new Promise((r) => setTimeout(r, ms));
  return svc.airtable.stats.byBase(baseId).requests - before;
}

test('a ping brings a change at once; between pings the base is read a tenth as often', async () => {
  const { base, syncId, url } = await syncedBase('Pinged');
  const [hook] = await webhooks(base.id);
  assert.is(hook?.notificationUrl, `http://127.0.0.1:${apiPort}/hooks/airtable/${syncId}`);

  // Idle: reads every PINGED_POLL_MS (6 s), not every 500 ms; no cycle falls in the window.
  const reads = await payloadReadsOver(base.id, 9000);
  assert.ok(reads <= 3, `${reads} requests in 9 s while idle (polling every 500 ms would be 18)`);

  for (let i = 0; i < 3; i++) {
    const [item] = base.createRecords('Items', [{ Name: `pinged ${i}` }]);
    const arrived = await waitForRows(url, `SELECT 1 FROM items WHERE id = '${item!.id}'`, (r) => r.length === 1);
    // Without the ping it would wait for the next read, up to 6 s away.
    assert.ok(arrived.ms < 2000, `arrived in ${arrived.ms} ms`);
    await new Promise((r) => setTimeout(r, 700));
  }
  const [after] = await webhooks(base.id);
  assert.is(after?.lastNotificationResult?.success, true, 'Airtable saw its pings answered');
});

test('a forged, unsigned or misaddressed ping is refused and wakes nothing', async () => {
  const { base, syncId } = await syncedBase('Forged');
  const body = JSON.stringify({ base: { id: base.id }, webhook: { id: 'achForged' }, timestamp: new Date().toISOString() });
  const post = (path: string, headers: Record<string, string>, payload = body) =>
    fetch(`${svc.api}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: payload });
  const forgedMac = createHmac('sha256', Buffer.from('not the secret')).update(body).digest('hex');
  await new Promise((r) => setTimeout(r, 1000)); // the first poll after the cycle has run
  const before = svc.airtable.stats.byBase(base.id).requests;
  const answers = [
    await post(`/hooks/airtable/${syncId}`, { 'x-airtable-content-mac': `hmac-sha256=${forgedMac}` }),
    await post(`/hooks/airtable/${syncId}`, {}),
    await post(`/hooks/airtable/${syncId}`, { 'x-airtable-content-mac': 'hmac-sha256=zz' }),
  ];
  for (const answer of answers) {
    assert.is(answer.status, 401);
    assert.match(((await answer.json()) as { error: { message: string } }).error.message, /not signed/);
  }
  const unknown = await post('/hooks/airtable/syn_doesnotexist00', { 'x-airtable-content-mac': `hmac-sha256=${forgedMac}` });
  assert.is(unknown.status, 404);
  const otherKind = await post(`/hooks/stripe/${syncId}`, {});
  assert.is(otherKind.status, 404);
  // A body past 64 KiB is a 413 before it is read; without a MAC it is refused on its headers first.
  const tooLarge = await post(`/hooks/airtable/${syncId}`, { 'x-airtable-content-mac': `hmac-sha256=${forgedMac}` }, 'x'.repeat(70_000));
  assert.is(tooLarge.status, 413);
  assert.is((await post(`/hooks/airtable/${syncId}`, {}, 'x'.repeat(70_000))).status, 401);
  // None of them woke the runner: at most the timer's read (every 6 s) fell in between.
  const reads = svc.airtable.stats.byBase(base.id).requests - before;
  assert.ok(reads <= 1, `${reads} reads after forged pings`);
});

test('a ping while the control database is unreachable is a 503, not a 500', async () => {
  const { base, syncId } = await syncedBase('Control down');
  const [hook] = await webhooks(base.id);
  const secret = svc.airtable.webhookSecret(hook!.id);
  const body = JSON.stringify({ base: { id: base.id }, webhook: { id: hook!.id }, timestamp: new Date().toISOString() });
  const ping = () =>
    fetch(`${svc.api}/hooks/airtable/${syncId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-airtable-content-mac': `hmac-sha256=${createHmac('sha256', secret).update(body).digest('hex')}` },
      body,
    });
  assert.is((await ping()).status, 200, 'signed by the webhook: taken');
  const database = new URL(svc.controlUrl).pathname.slice(1);
  await withClient(serverAdminUrl(), async (admin) => {
    await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
  });
  try {
    const answer = await ping();
    assert.is(answer.status, 503);
    assert.match(((await answer.json()) as { error: { message: string } }).error.message, /control database is unreachable/);
  } finally {
    await withClient(serverAdminUrl(), (admin) => admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`));
  }
  await waitFor('pings taken again', async () => ((await ping()).status === 200 ? true : undefined), 20_000);
});

test('a base whose pings do not arrive is polled every second', async () => {
  // The public URL leads nowhere: Airtable's pings fail, and it says so in the webhook list.
  const closed = await freePort();
  const other = await startTestService({
    config: { roles: ['api', 'sync'], publicOrigin: `http://127.0.0.1:${closed}` },
    tunables: { airtable: { pollIntervalMs: 500, pingedPollIntervalMs: 60_000, cycleGapMs: 300 }, workerTickMs: 250 },
  });
  try {
    const { base, url } = await syncedBase('Unreachable', other);
    base.createRecords('Items', [{ Name: 'unpinged' }]);
    // The failed ping shows in the list, and the next cycle reads it there.
    await waitFor('the warning that pings fail', async () => (/pings do not reach this service/.test(other.logs.text) ? true : undefined), 15_000);
    const [item] = base.createRecords('Items', [{ Name: 'polled' }]);
    const arrived = await waitForRows(url, `SELECT 1 FROM items WHERE id = '${item!.id}'`, (r) => r.length === 1);
    assert.ok(arrived.ms < 3000, `arrived in ${arrived.ms} ms (the pinged poll is 60 s)`);
  } finally {
    await other.stop();
  }
});

test.run();
