/**
 * A proxied Stripe write in another API version than the sync's tables is fetched again by
 * id in the pinned one before it is written. That fetch is the service's own request: it
 * comes out of the sync's share of the account's limit, not out of the customer's. Taken
 * from the customer's side, it let the proxy and the sync together use more than the 20 a
 * second the sync leaves the customer room beside, and a customer keeping to the rest (its
 * own requests straight to Stripe, which the quota never sees, and its proxied writes) was
 * answered 429 (found by the traffic simulation).
 *
 * Here the sync backfills at its full share while a customer sends requests straight to
 * Stripe and writes through the proxy in its client's API version, 4 a second in all; the
 * fake must refuse nothing. The fake runs in its own process: in this one, two services'
 * work delays when it reads requests, and it would count them closer together than they came.
 */
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { pacedWrites } from './harness/paced.ts';
import { refusalsExplained } from './harness/quota.ts';
import { createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService, waitBackfilled } from './harness/service.ts';

const KEY = 'sk_test_PROXYSHAREPROXYSHARE012345';
const SECRET_KEY = randomBytes(32).toString('base64');
/** An API version other than the tables': every proxied write is fetched again. */
const CLIENT_VERSION = '2024-06-20';

let fake: FakeProcess;
let svc: TestService | undefined;
let worker: TestService | undefined;
let account: TestAccount;
let customerId: string;

test.before(
  loudSetUp(
    async () => {
      fake = await startFakeProcess({ kind: 'stripe', key: KEY, customers: 40, seed: 13 });
      customerId = fake.first!;
      svc = await startTestService({ config: { roles: ['api', 'proxy'], secretKeyBase64: SECRET_KEY }, stripeUrl: fake.url });
      account = await createAccount(svc);
    },
    () => svc,
  ),
);

test.after(async () => {
  await worker?.stop();
  await svc?.stop();
  await fake?.close();
});

test("the proxy's fetch in the pinned version comes out of the sync's share: a customer keeping to the rest sees no 429", async () => {
  assert.is.not(CLIENT_VERSION, STRIPE_API_VERSION);
  const url = new URL(fake.url);
  const direct = new Stripe(KEY, { host: url.hostname, port: Number(url.port), protocol: 'http', apiVersion: CLIENT_VERSION as never, maxNetworkRetries: 0 });
  const proxied = new Stripe(KEY, {
    host: '127.0.0.1',
    port: svc!.service.proxyPort!,
    protocol: 'http',
    apiVersion: CLIENT_VERSION as never,
    maxNetworkRetries: 0,
  });
  const created = await request(svc!.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: KEY } });
  assert.is(created.status, 201, created.text);
  const syncId: string = created.body.id;
  // The key check's requests leave Stripe's window before the sync starts.
  await new Promise((r) => setTimeout(r, 1100));
  const refusedBefore = (await fake.stats()).rateLimited;
  // GET /v1/account exactly (a prefix's count includes /v1/accounts and /v1/account_links, the sync's lists).
  const lookups = async () => {
    const { paths } = await fake.stats('/v1/account', '/v1/accounts', '/v1/account_');
    return paths['/v1/account']! - paths['/v1/accounts']! - paths['/v1/account_']!;
  };
  const lookupsBefore = await lookups();
  worker = await startTestService({
    config: { roles: ['sync'], databaseUrl: svc!.controlUrl, secretKeyBase64: SECRET_KEY },
    tunables: { workerTickMs: 250 },
    stripeUrl: fake.url,
  });

  let backfilled = false;
  const failures: string[] = [];
  let writes = 0;
  // The customer: requests straight to Stripe and writes through the proxy, 4 a second in
  // all (each counted from its answer), within the 5 the sync leaves.
  const paced = pacedWrites(4);
  const every = async (act: () => Promise<unknown>) => {
    while (!backfilled) {
      try {
        await paced(act);
      } catch (error) {
        failures.push(String(error));
      }
    }
  };
  const traffic = Promise.all([
    every(() => direct.customers.list({ limit: 1 })),
    every(async () => {
      await proxied.customers.update(customerId, { metadata: { n: String(++writes) } });
    }),
  ]);
  try {
    await waitBackfilled(svc!.api, account.token, syncId);
  } finally {
    backfilled = true;
    await traffic;
  }
  assert.ok(writes >= 6, `${writes} proxied writes`);
  assert.equal(failures, []);
  const refused = (await fake.stats()).rateLimited - refusedBefore;
  if (refused > 0) assert.unreachable(`${refused} requests refused with 429: ${await refusalsExplained(await fake.arrivals(), svc!.controlUrl, 'stripe%')}`);
  // The sync's own key: its account is known from the sync, so the proxy asks Stripe nothing
  // (found by the 45-minute soak: that lookup, on top of the sync's full share, was a 429).
  assert.is((await lookups()) - lookupsBefore, 0, 'no account lookup for the sync key');
});

test.run();
