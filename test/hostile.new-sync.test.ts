/**
 * A proxied write into a Stripe sync created a second earlier failed its write-through with
 * `relation "public_swap._stripe_versions" does not exist`: the tables were the runner's to
 * build, after the 201. They are built before the sync is announced now. Here no runner runs
 * at all (the service has no sync role), so only creation can have built them.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { query } from './harness/postgres.ts';
import { createAccount, request, startTestService, STRIPE_TEST_KEYS, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;

test.before(async () => {
  svc = await startTestService();
});
test.after(async () => svc.stop());

test('a proxied Stripe create right after the sync is created is written through', async () => {
  const account = await createAccount(svc);
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  assert.is(stripeSyncBody().api_key, STRIPE_TEST_KEYS[0]);
  const proxied = new Stripe(STRIPE_TEST_KEYS[0]!, {
    host: '127.0.0.1',
    port: svc.service.proxyPort!,
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 0,
  });
  const customer = await proxied.customers.create({ name: 'First customer' });
  assert.is(customer.lastResponse.headers['tributary-write-through'], undefined, 'written through');
  const rows = await query<{ name: string }>(created.body.database.url, 'SELECT name FROM customer WHERE id = $1', [customer.id]);
  assert.equal(rows, [{ name: 'First customer' }]);
  assert.not.ok(svc.logs.text.includes('write-through failed'), svc.logs.text.slice(-2000));
});

test.run();
