/**
 * The fake Stripe's Connect, through stripe-node: a platform creates, lists, updates and
 * deletes connected accounts, and acts on each with `Stripe-Account`. Each connected account's
 * objects and events are its own; its events name it; anyone else's account, or a deleted
 * one, is a 403 `account_invalid`; a restricted key needs the Connect permission.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_FAKE_STRIPE_KEY, runFakeStripeCli } from '../fakes/stripe/cli.ts';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../fakes/stripe/index.ts';

const API_VERSION = '2026-08-26.dahlia';
const KEY = 'sk_test_51ConnectPlatform0000000000001';
const OTHER_KEY = 'sk_test_51ConnectOtherPlatform00000002';
const NO_CONNECT = 'rk_test_51ConnectNoConnect00000000003';

let fake: FakeStripe;
let platform: FakeStripeAccount;
let stripe: Stripe;

const client = (key: string) =>
  new Stripe(key, { host: '127.0.0.1', port: fake.port, protocol: 'http', apiVersion: API_VERSION as never, maxNetworkRetries: 0 });

test.before(async () => {
  fake = await startFakeStripe();
  platform = fake.createAccount();
  fake.addKey(KEY, { account: platform.id });
  fake.addKey(OTHER_KEY, { account: fake.createAccount().id });
  fake.addKey(NO_CONNECT, { account: platform.id, restricted: { read: ['customer'], write: [] } });
  stripe = client(KEY);
});
test.after(async () => fake.close());
// Every test spends most of a second of the platform's 25 requests: the next starts on a fresh second.
test.before.each(() => new Promise((r) => setTimeout(r, 1100)));

async function refused(promise: Promise<unknown>): Promise<Stripe.errors.StripeError> {
  try {
    await promise;
  } catch (error) {
    return error as Stripe.errors.StripeError;
  }
  throw new Error('the request succeeded');
}

test('a platform creates, lists, reads, updates and deletes connected accounts', async () => {
  const a = await stripe.accounts.create({ type: 'custom', country: 'US', email: 'a@example.com', metadata: { tier: 'gold' } });
  assert.match(a.id, /^acct_/);
  assert.is(a.object, 'account');
  assert.is(a.type, 'custom');
  assert.equal(a.metadata, { tier: 'gold' });
  const b = await stripe.accounts.create({ controller: { fees: { payer: 'application' } } });
  const listed = await stripe.accounts.list({ limit: 10 });
  assert.equal(
    listed.data.map((x) => x.id),
    [b.id, a.id],
    'newest first',
  );
  assert.is((await stripe.accounts.retrieve(a.id)).email, 'a@example.com');
  // Its own view of itself, through the header.
  assert.is((await stripe.accounts.retrieveCurrent({}, { stripeAccount: a.id })).id, a.id);

  const updated = await stripe.accounts.update(a.id, { metadata: { tier: 'platinum' } });
  assert.equal(updated.metadata, { tier: 'platinum' });
  const feed = await stripe.events.list({ type: 'account.updated' });
  assert.is(feed.data[0]?.data.object && (feed.data[0].data.object as Stripe.Account).id, a.id, "account.updated on the platform's feed");

  const missing = await refused(stripe.accounts.create({}));
  assert.is(missing.statusCode, 400);
  assert.is(missing.param, 'type');

  const deleted = await stripe.accounts.del(b.id);
  assert.equal(deleted, { id: b.id, object: 'account', deleted: true });
  const gone = await refused(stripe.customers.list({}, { stripeAccount: b.id }));
  assert.is(gone.statusCode, 403);
  assert.is(gone.code, 'account_invalid');
});

test("a connected account's objects and events are its own, and its events name it", async () => {
  const a = await stripe.accounts.create({ type: 'express' });
  const b = await stripe.accounts.create({ type: 'express' });
  const inA = await stripe.customers.create({ email: 'in-a@example.com' }, { stripeAccount: a.id });
  // Products may share an id across accounts (the caller chooses it).
  await stripe.products.create({ id: 'gold', name: 'Gold A' }, { stripeAccount: a.id });
  await stripe.products.create({ id: 'gold', name: 'Gold B' }, { stripeAccount: b.id });
  await stripe.products.create({ id: 'gold', name: 'Gold platform' });

  const ids = async (opts?: Stripe.RequestOptions) => (await stripe.customers.list({}, opts)).data.map((c) => c.id);
  assert.ok((await ids({ stripeAccount: a.id })).includes(inA.id));
  assert.not.ok((await ids()).includes(inA.id), 'not the platform’s');
  assert.not.ok((await ids({ stripeAccount: b.id })).includes(inA.id), 'not another connected account’s');
  assert.is((await stripe.products.retrieve('gold', {}, { stripeAccount: b.id })).name, 'Gold B');
  assert.is((await stripe.products.retrieve('gold')).name, 'Gold platform');

  const events = (await stripe.events.list({}, { stripeAccount: a.id })).data;
  assert.equal(events.map((e) => e.type).sort(), ['customer.created', 'product.created']);
  for (const event of events) assert.is(event.account, a.id);
  const own = (await stripe.events.list({ type: 'customer.created' })).data;
  for (const event of own) assert.is(event.account, undefined, 'the platform’s own events name no account');

  // Counted against the platform's rate limit, as Stripe does.
  const before = fake.stats.byAccount(platform.id).requests;
  await stripe.customers.list({}, { stripeAccount: a.id });
  assert.is(fake.stats.byAccount(platform.id).requests, before + 1);

  const controlled = platform.connectedAccounts().find((x) => x.id === a.id)!;
  assert.equal(
    controlled.all('customers').map((c) => c.id),
    [inA.id],
  );
});

test("a connected account's own key reads its objects, within its own rate limit", async () => {
  const a = await stripe.accounts.create({ type: 'standard' });
  const made = await stripe.customers.create({ email: 'own-key@example.com' }, { stripeAccount: a.id });
  // A standard account's owner has keys of the account too.
  const ownKey = 'sk_test_51ConnectedOwnKey00000000000004';
  fake.addKey(ownKey, { account: a.id });
  const own = client(ownKey);
  assert.equal(
    (await own.customers.list()).data.map((c) => c.id),
    [made.id],
  );
  assert.is((await own.accounts.retrieveCurrent()).id, a.id);
  const before = fake.stats.byAccount(a.id).requests;
  await own.customers.list();
  assert.is(fake.stats.byAccount(a.id).requests, before + 1, 'counted against the account itself');
});

test("another platform's key, or a key without the Connect permission, reaches no connected account", async () => {
  const a = await stripe.accounts.create({ type: 'custom' });
  const foreign = await refused(client(OTHER_KEY).customers.list({}, { stripeAccount: a.id }));
  assert.is(foreign.statusCode, 403);
  assert.is(foreign.code, 'account_invalid');
  const restricted = await refused(client(NO_CONNECT).customers.list({}, { stripeAccount: a.id }));
  assert.is(restricted.statusCode, 403);
  assert.match(restricted.message, /rak_connect_read|permission/);
  const listing = await refused(client(NO_CONNECT).accounts.list());
  assert.is(listing.statusCode, 403);
  // A connected account cannot make accounts of its own.
  const nested = await refused(stripe.accounts.create({ type: 'custom' }, { stripeAccount: a.id }));
  assert.is(nested.statusCode, 400);
});

test('`tributary fake stripe --connected 2` starts a platform with two generated connected accounts', async () => {
  const cliFake = await runFakeStripeCli({ port: 0, customers: 20, connected: 2 });
  try {
    const platformClient = new Stripe(DEFAULT_FAKE_STRIPE_KEY, { host: '127.0.0.1', port: cliFake.port, protocol: 'http', maxNetworkRetries: 0 });
    const listed = (await platformClient.accounts.list()).data;
    assert.is(listed.length, 2);
    for (const account of listed) {
      const customers = (await platformClient.customers.list({ limit: 100 }, { stripeAccount: account.id })).data;
      assert.is(customers.length, 2, 'a tenth of the customers each');
    }
  } finally {
    await cliFake.close();
  }
});

test.run();
