import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.ts';
import { withCredentials } from '../src/db/sql.ts';
import { freePort } from './harness/ports.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { createAccount, request, startTestService, stripeSyncBody, type TestAccount, type TestService } from './harness/service.ts';
import { fileLogger } from './harness/test-log.ts';

let svc: TestService;
let account: TestAccount;
let customer: EmbeddedPostgres;
let customerDir: string;

test.before(async () => {
  // The customer's server is on loopback here: the operator allows private servers.
  svc = await startTestService({ config: { databaseAllowPrivate: true } });
  account = await createAccount(svc);
  customerDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-customer-'));
  customer = await startEmbeddedPostgres({ dir: customerDir, port: await freePort(), logger: fileLogger() });
});
test.after(async () => {
  await svc.stop();
  await customer.stop();
  await rm(customerDir, { recursive: true, force: true });
});

test('a sync on a customer-owned server gets its database there, and loses it there on delete', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { ...stripeSyncBody(), database_url: customer.adminUrl },
  });
  assert.is(created.status, 201, created.text);
  const { name, url, region } = created.body.database;
  assert.is(new URL(url).port, new URL(customer.adminUrl).port, 'the reader URL points at the customer server');
  assert.is(region, null, 'a customer-owned server is in no region of the pool');
  const [placed] = await query(svc.controlUrl, 'SELECT server_id FROM syncs WHERE id = $1', [created.body.id]);
  assert.equal(placed, { server_id: null }, 'and takes no place on a pool server');
  assert.equal(await query(url, 'SELECT count(*)::int AS n FROM _sync_meta'), [{ n: 1 }]);
  const onShared = await query(serverAdminUrl(), 'SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  assert.equal(onShared, [], 'nothing was made on the shared server');

  const shown = await request(svc.api, 'GET', `/api/syncs/${created.body.id}`, { token: account.token });
  assert.not.ok(shown.text.includes(new URL(customer.adminUrl).password), 'the customer admin password never comes back');

  await request(svc.api, 'DELETE', `/api/syncs/${created.body.id}`, { token: account.token });
  const left = await query(customer.adminUrl, 'SELECT datname FROM pg_database WHERE datname = $1', [name]);
  assert.equal(left, []);
  const slots = await query(customer.adminUrl, 'SELECT slot_name FROM pg_replication_slots');
  assert.equal(slots, []);
});

test('an unreachable server or a role without the needed rights is a clear 422', async () => {
  const unreachable = `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`;
  const refused = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { ...stripeSyncBody(), database_url: unreachable },
  });
  assert.is(refused.status, 422, refused.text);
  assert.match(refused.body.error.message, /cannot connect to database_url/);

  await query(customer.adminUrl, "CREATE ROLE weak LOGIN PASSWORD 'weak-password'");
  const weak = withCredentials(customer.adminUrl, 'weak', 'weak-password');
  const lacking = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { ...stripeSyncBody(), database_url: weak },
  });
  assert.is(lacking.status, 422, lacking.text);
  assert.match(lacking.body.error.message, /CREATEDB.*CREATEROLE.*REPLICATION/);
  assert.not.ok(lacking.text.includes('weak-password'));
  const rows = await query(svc.controlUrl, 'SELECT id FROM syncs');
  assert.equal(rows, [], 'a refused create leaves no row');
});

test.run();
