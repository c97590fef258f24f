/**
 * Two events of one object in one second (Stripe's `created` has one-second resolution) end
 * with the later one's data in the sync's database: read in one page, and across a restart of
 * the service between the two, the first never re-applied over the second. The fake holds
 * its second so the pair is exactly that; stripe-node makes the changes.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type Stripe from 'stripe';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { request, startTestService, type TestService } from './harness/service.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const TUNABLES = { workerTickMs: 250, stripe: { pollIntervalMs: 300 } };
let s: StripeSyncSetUp;
/** The service now running the sync: the first, or the one started after a stop. */
let svc: TestService;

test.before(async () => {
  s = await backfilledStripeSync({ key: 'sk_test_SAMESECONDSAMESECOND00', seed: 41, customers: 6, pollIntervalMs: 300, config: { roles: ['api', 'sync'] } });
  svc = s.svc;
});

test.after(async () => {
  await svc?.stop();
  // The first service, stopped by the test, still has its fake Airtable open.
  if (s && svc !== s.svc) await s.svc.airtable.close();
  await s?.fake.close();
});

const nameIn = async (id: string) => (await query<{ name: string }>(s.reader, 'SELECT name FROM public.customer WHERE id = $1', [id]))[0]?.name;

/** The two newest customer.updated events of the customer: one second, the later one first, distinct data. */
async function sameSecondPair(id: string): Promise<Stripe.Event[]> {
  const events = (await s.stripe.events.list({ type: 'customer.updated', limit: 100 })).data.filter((e) => (e.data.object as { id: string }).id === id);
  const [later, earlier] = events;
  assert.is(later!.created, earlier!.created, 'both events in one second');
  assert.is.not((later!.data.object as Stripe.Customer).name, (earlier!.data.object as Stripe.Customer).name);
  return [later!, earlier!];
}

/** The name stays `expected` over several reads of the feed (nothing applied after it undoes it). */
async function stays(id: string, expected: string): Promise<void> {
  await waitFor(`${id} named ${expected}`, async () => ((await nameIn(id)) === expected ? true : undefined), 15_000);
  for (let i = 0; i < 6; i++) {
    await new Promise((r) => setTimeout(r, 300));
    assert.is(await nameIn(id), expected);
  }
}

test('two updates of a customer in one second, read in one page: the later one wins', async () => {
  const id = s.upstream.all('customers')[0]!.id as string;
  // One read of the feed is held until both events exist, so it finds them together.
  s.fake.faults.add({ match: { method: 'GET', path: '/v1/events', account: s.upstream.id }, kind: 'delay', delayMs: 1500 });
  await waitFor('the held read of the feed', async () => (s.fake.faults.active === 0 ? true : undefined), 5000);
  s.fake.clock.holdSecond();
  await s.stripe.customers.update(id, { name: 'Earlier in the second' });
  await s.stripe.customers.update(id, { name: 'Later in the second' });
  s.fake.clock.releaseSecond();
  const [later] = await sameSecondPair(id);
  assert.is((later!.data.object as Stripe.Customer).name, 'Later in the second');
  await stays(id, 'Later in the second');
  assert.is((await s.view()).status.last_error, null);
});

test('the first applied, the service stopped, the second made, the service started: the second wins', async () => {
  const id = s.upstream.all('customers')[1]!.id as string;
  s.fake.clock.holdSecond();
  await s.stripe.customers.update(id, { name: 'Before the stop' });
  await waitFor('the first update', async () => ((await nameIn(id)) === 'Before the stop' ? true : undefined), 10_000);
  await svc.service.stop();

  await s.stripe.customers.update(id, { name: 'While stopped' });
  s.fake.clock.releaseSecond();
  await sameSecondPair(id);

  svc = await startTestService({
    config: { roles: ['api', 'sync'], databaseUrl: s.svc.controlUrl, adminToken: s.svc.adminToken, dataDir: s.svc.dataDir },
    tunables: TUNABLES,
    stripeUrl: s.fake.url,
  });
  await stays(id, 'While stopped');
  const view = await request(svc.api, 'GET', `/api/syncs/${s.syncId}`, { token: s.account.token });
  assert.is(view.body.status.last_error, null);
});

test.run();
