/**
 * One account could starve every tenant: any number of syncs of one Stripe key, each reader
 * allowed 50 connections, 570–597 of the server's 600 slots held by one account's readers.
 * Now an account syncs an upstream once (409 naming the sync), has at most `max_syncs`
 * syncs, its readers share a connection budget (5 each by default), the operator changes
 * each, and the service's own role keeps reserved slots on the server.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { reservedSlots } from '../src/control/provisioner.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { airtableSyncBody, createAccount, request, startTestService, stripeSyncBody, TEST_BASES, type TestService } from './harness/service.ts';

let svc: TestService;

test.before(async () => {
  svc = await startTestService();
});
test.after(async () => svc.stop());

const create = (token: string, body: object) => request(svc.api, 'POST', '/api/syncs', { token, body });
const limits = (accountId: string, body: object) => request(svc.api, 'PATCH', `/api/accounts/${accountId}`, { token: svc.adminToken, body });

test('an account syncs one Stripe account once: the second is a 409 naming the first', async () => {
  const account = await createAccount(svc, 'twice');
  const first = await create(account.token, stripeSyncBody());
  assert.is(first.status, 201, first.text);
  const second = await create(account.token, stripeSyncBody());
  assert.is(second.status, 409, second.text);
  assert.match(second.body.error.message, new RegExp(`already syncs Stripe account acct_\\w+: sync ${first.body.id}`));
  const other = await createAccount(svc, 'another tenant');
  assert.is((await create(other.token, stripeSyncBody())).status, 201, 'another account may sync it');
});

test('the operator sets how many syncs an account may have', async () => {
  const account = await createAccount(svc, 'capped');
  const set = await limits(account.id, { max_syncs: 2 });
  assert.is(set.status, 200, set.text);
  assert.equal(set.body.limits, { max_syncs: 2, reader_connection_budget: 100, max_consumer_groups: 50, max_group_members: 20, max_webhooks: 100 });
  assert.is((await create(account.token, airtableSyncBody(TEST_BASES[0]))).status, 201);
  assert.is((await create(account.token, airtableSyncBody(TEST_BASES[1]))).status, 201);
  const third = await create(account.token, airtableSyncBody(TEST_BASES[2]));
  assert.is(third.status, 409, third.text);
  assert.match(third.body.error.message, /limit of 2 syncs/);
  // Refused before the upstream is asked: a bogus key gets the limit, and Airtable sees no request.
  const asked = svc.airtable.stats.requests;
  const bogus = await create(account.token, { ...airtableSyncBody(TEST_BASES[3]), api_key: 'patBOGUS.0123456789abcdef' });
  assert.is(bogus.status, 409, bogus.text);
  assert.match(bogus.body.error.message, /limit of 2 syncs/);
  assert.is(svc.airtable.stats.requests, asked, 'no upstream request for a sync past the limit');
  assert.is((await limits(account.id, { max_syncs: 3 })).status, 200);
  assert.is((await create(account.token, airtableSyncBody(TEST_BASES[2]))).status, 201);
  assert.is(
    (await request(svc.api, 'PATCH', `/api/accounts/${account.id}`, { token: account.token, body: { max_syncs: 50 } })).status,
    403,
    'the account cannot raise its own',
  );
  assert.is((await limits('acc_nope', { max_syncs: 1 })).status, 404);
  assert.is((await limits(account.id, { max_syncs: -1 })).status, 400);
});

test("an account's readers share its connection budget, and each reader has its own small limit", async () => {
  const account = await createAccount(svc, 'budget');
  assert.is((await limits(account.id, { reader_connection_budget: 7 })).status, 200);
  const first = await create(account.token, airtableSyncBody(TEST_BASES[0]));
  const second = await create(account.token, airtableSyncBody(TEST_BASES[1]));
  assert.equal([first.body.database.connection_limit, second.body.database.connection_limit], [5, 2]);
  const third = await create(account.token, airtableSyncBody(TEST_BASES[2]));
  assert.is(third.status, 409, third.text);
  assert.match(third.body.error.message, /whole connection budget of 7/);

  // The reader cannot hold more than its limit: the next connection is refused by the server.
  const held: pg.Client[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const client = new pg.Client({ connectionString: second.body.database.url });
      await client.connect();
      held.push(client);
    }
    const extra = new pg.Client({ connectionString: second.body.database.url });
    const refused = await extra.connect().then(
      () => 'connected',
      (error: Error) => error.message,
    );
    await extra.end().catch(() => undefined);
    assert.match(refused, /too many connections for role/);
  } finally {
    for (const client of held) await client.end();
  }

  // The operator moves connections between readers, within the budget.
  const tooMuch = await request(svc.api, 'PATCH', `/api/syncs/${second.body.id}`, { token: svc.adminToken, body: { reader_connection_limit: 3 } });
  assert.is(tooMuch.status, 409, tooMuch.text);
  assert.match(tooMuch.body.error.message, /at most 2 is left/);
  const byTenant = await request(svc.api, 'PATCH', `/api/syncs/${first.body.id}`, { token: account.token, body: { reader_connection_limit: 1 } });
  assert.is(byTenant.status, 403, 'a tenant cannot set its own reader limit');
  const lowered = await request(svc.api, 'PATCH', `/api/syncs/${first.body.id}`, { token: svc.adminToken, body: { reader_connection_limit: 1 } });
  assert.is(lowered.status, 200, lowered.text);
  assert.is(lowered.body.database.connection_limit, 1);
  const [role] = await query<{ rolconnlimit: number }>(serverAdminUrl(), 'SELECT rolconnlimit FROM pg_roles WHERE rolname = $1', [
    `${first.body.database.name}_ro`,
  ]);
  assert.is(role!.rolconnlimit, 1);
  const raised = await request(svc.api, 'PATCH', `/api/syncs/${second.body.id}`, { token: svc.adminToken, body: { reader_connection_limit: 6 } });
  assert.is(raised.status, 200, raised.text);
  assert.is((await create(account.token, airtableSyncBody(TEST_BASES[2]))).status, 409, 'the budget is still whole');
});

test("the service's own role keeps reserved slots on the sync databases' server", async () => {
  assert.ok((await reservedSlots(serverAdminUrl())) >= 20);
  assert.not.ok(svc.logs.text.includes('reserves fewer than 20 connections'));
});

test.run();
