/**
 * The fake Stripe's webhook endpoints and signed deliveries, through stripe-node: the secret
 * is shown once; an account's events reach its own endpoints and a connected account's reach
 * the platform's Connect endpoints, with `account` set; stripe-node's own verifier accepts the
 * signature; failed deliveries are retried, and the control API can hold or lose them.
 */
import { createServer, type Server } from 'node:http';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type FakeStripe, startFakeStripe } from '../fakes/stripe/index.ts';
import { closeServer, listen } from '../fakes/shared/listen.ts';

const API_VERSION = '2026-08-26.dahlia';
const KEY = 'sk_test_51HooksPlatform00000000000001';
const NO_WEBHOOKS = 'rk_test_51HooksNoWebhooks000000000002';

interface Received {
  path: string;
  signature: string;
  body: string;
}

let fake: FakeStripe;
let stripe: Stripe;
let receiver: Server;
let receiverUrl: string;
const received: Received[] = [];
/** Answers 500 to this many deliveries before taking them. */
let failNext = 0;

test.before(async () => {
  fake = await startFakeStripe();
  const platform = fake.createAccount();
  fake.addKey(KEY, { account: platform.id });
  fake.addKey(NO_WEBHOOKS, { account: platform.id, restricted: { read: ['webhook_endpoint'], write: ['customer'] } });
  stripe = new Stripe(KEY, { host: '127.0.0.1', port: fake.port, protocol: 'http', apiVersion: API_VERSION as never, maxNetworkRetries: 0 });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (failNext > 0) {
        failNext--;
        res.writeHead(500).end();
        return;
      }
      received.push({ path: req.url ?? '', signature: String(req.headers['stripe-signature'] ?? ''), body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200).end('{}');
    });
  });
  receiverUrl = (await listen(receiver, 0, '127.0.0.1')).url;
});
test.after(async () => {
  await fake.close();
  await closeServer(receiver);
});
// The platform's 25 requests a second: each test starts on a fresh second.
test.before.each(() => new Promise((r) => setTimeout(r, 1100)));

async function until<T>(read: () => T | undefined, what: string, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const deliveryOf = (path: string, id: string) => () =>
  received.find((r) => r.path === path && (JSON.parse(r.body) as { data: { object: { id: string } } }).data.object.id === id);

test('endpoints are created with a secret shown once, listed, updated and deleted', async () => {
  const endpoint = await stripe.webhookEndpoints.create({ url: `${receiverUrl}/crud`, enabled_events: ['customer.created'], metadata: { a: '1' } });
  assert.match(endpoint.id, /^we_/);
  assert.match(endpoint.secret ?? '', /^whsec_[0-9A-Za-z]{32}$/);
  assert.is(endpoint.status, 'enabled');
  const read = await stripe.webhookEndpoints.retrieve(endpoint.id);
  assert.is(read.secret, undefined, 'the secret is not shown again');
  assert.ok((await stripe.webhookEndpoints.list()).data.some((e) => e.id === endpoint.id));
  const disabled = await stripe.webhookEndpoints.update(endpoint.id, { disabled: true });
  assert.is(disabled.status, 'disabled');
  assert.is((await stripe.webhookEndpoints.del(endpoint.id)).deleted, true);
  const gone = await stripe.webhookEndpoints.retrieve(endpoint.id).catch((e: Stripe.errors.StripeError) => e);
  assert.is((gone as Stripe.errors.StripeError).statusCode, 404);
  const bad = await stripe.webhookEndpoints.create({ url: 'not a url', enabled_events: ['*'] }).catch((e: Stripe.errors.StripeError) => e);
  assert.is((bad as Stripe.errors.StripeError).statusCode, 400);
  assert.is((bad as Stripe.errors.StripeError).param, 'url');
  const wildcard = await stripe.webhookEndpoints
    .create({ url: `${receiverUrl}/x`, enabled_events: ['customer.*' as never] })
    .catch((e: Stripe.errors.StripeError) => e);
  assert.is((wildcard as Stripe.errors.StripeError).statusCode, 400, 'only `*` is a wildcard');
  const denied = await new Stripe(NO_WEBHOOKS, { host: '127.0.0.1', port: fake.port, protocol: 'http', maxNetworkRetries: 0 }).webhookEndpoints
    .create({ url: `${receiverUrl}/x`, enabled_events: ['*'] })
    .catch((e: Stripe.errors.StripeError) => e);
  assert.is((denied as Stripe.errors.StripeError).statusCode, 403, 'writing endpoints needs the webhook permission');
});

test("a platform's own events reach its endpoints, a connected account's reach its Connect endpoints, signed", async () => {
  const own = await stripe.webhookEndpoints.create({ url: `${receiverUrl}/own`, enabled_events: ['customer.created'] });
  const connect = await stripe.webhookEndpoints.create({ url: `${receiverUrl}/connect`, enabled_events: ['*'], connect: true });
  const account = await stripe.accounts.create({ type: 'custom' });
  const mine = await stripe.customers.create({ email: 'platform@example.com' });
  const theirs = await stripe.customers.create({ email: 'connected@example.com' }, { stripeAccount: account.id });

  const ownDelivery = await until(deliveryOf('/own', mine.id), "the platform's customer.created");
  const event = stripe.webhooks.constructEvent(ownDelivery.body, ownDelivery.signature, own.secret as string);
  assert.is(event.type, 'customer.created');
  assert.is(event.account, undefined, "the platform's own event names no account");

  const connectDelivery = await until(deliveryOf('/connect', theirs.id), "the connected account's customer.created");
  const pushed = stripe.webhooks.constructEvent(connectDelivery.body, connectDelivery.signature, connect.secret as string);
  assert.is(pushed.account, account.id, 'a Connect delivery names the connected account');
  const listed = await stripe.events.retrieve(pushed.id, {}, { stripeAccount: account.id });
  assert.is(listed.id, pushed.id, "the delivery is the event of the account's own feed");

  // Each goes only where it belongs, and a wrong secret does not verify.
  await new Promise((r) => setTimeout(r, 300));
  assert.not.ok(deliveryOf('/own', theirs.id)(), "a connected account's event does not reach the platform's own endpoint");
  assert.not.ok(deliveryOf('/connect', mine.id)(), "the platform's own event does not reach its Connect endpoint");
  assert.throws(() => stripe.webhooks.constructEvent(connectDelivery.body, connectDelivery.signature, own.secret as string));
  await stripe.webhookEndpoints.del(own.id);
  await stripe.webhookEndpoints.del(connect.id);
});

test('a failed delivery is retried; held deliveries go out on resume; dropped ones never', async () => {
  const endpoint = await stripe.webhookEndpoints.create({ url: `${receiverUrl}/retry`, enabled_events: ['customer.updated'] });
  const customer = await stripe.customers.create({ email: 'retry@example.com' });
  failNext = 1;
  const before = fake.webhooks.stats();
  await stripe.customers.update(customer.id, { name: 'first' });
  const retried = await until(deliveryOf('/retry', customer.id), 'the delivery after its retry', 5000);
  assert.ok(stripe.webhooks.constructEvent(retried.body, retried.signature, endpoint.secret as string));
  assert.is(fake.webhooks.stats().failed - before.failed, 1, 'one attempt failed, then one succeeded');

  received.length = 0;
  fake.webhooks.pause();
  await stripe.customers.update(customer.id, { name: 'second' });
  await new Promise((r) => setTimeout(r, 300));
  assert.is(received.length, 0, 'held while paused');
  fake.webhooks.resume();
  await until(deliveryOf('/retry', customer.id), 'the held delivery');

  received.length = 0;
  fake.webhooks.drop(1);
  await stripe.customers.update(customer.id, { name: 'third' });
  await new Promise((r) => setTimeout(r, 500));
  assert.is(received.length, 0, 'the dropped delivery never came');
  await stripe.customers.update(customer.id, { name: 'fourth' });
  const next = await until(deliveryOf('/retry', customer.id), 'the delivery after the dropped one');
  assert.is((JSON.parse(next.body) as { data: { object: { name: string } } }).data.object.name, 'fourth');
  const event = await stripe.events.retrieve((JSON.parse(next.body) as { id: string }).id);
  assert.is(event.pending_webhooks, 1, 'the event counted its endpoint');
});

test.run();
