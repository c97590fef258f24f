/**
 * The Stripe sync's share of the account's limit (80 %: 20 of test mode's 25 requests/s)
 * leaves the rest to the customer's own requests, which go straight to Stripe and which the
 * quota never sees. So the share must hold as Stripe counts it: by arrival, in any sliding
 * second. Stripe (and the strict fake, fakes/shared/rate-limit.ts) counts arrival times,
 * which jitter against the limiter's grant times; kept over the exact second, the share let
 * the sync's 21st request follow its 1st by 1 ms more than a second, and the fake counted
 * 21 to 23 of the sync's requests in one second, enough to refuse a customer who kept to
 * the rest.
 *
 * Here a customer sends 4 requests a second straight to the fake Stripe while the sync
 * backfills at its full share; the request log is the fake server's own (every request it
 * received, when and from whom), and the 429 count is the fake's. The fake runs in a process
 * of its own, as Stripe does: in this one, the sync's work would delay when the fake reads
 * requests, and it would count them closer together than they came (harness/fake-process.ts).
 * The API (which checks the key when the sync is created) and the sync worker run apart, so
 * the sync starts once the check's requests have left Stripe's window. A second test pins the
 * limiter's rule itself.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { QuotaLimiter } from '../src/quota/limiter.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { syncShare } from '../src/stripe/runner.ts';
import { stripeRule } from '../src/stripe/client.ts';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { grantsLogged, peak, peakWindow, refusalsExplained } from './harness/quota.ts';
import { createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService, waitBackfilled } from './harness/service.ts';

const KEY = 'sk_test_SHARESHARESHARE0123456789';
/** One secret key for the API and the worker, so the worker can read the sync's API key. */
const SECRET_KEY = randomBytes(32).toString('base64');
/** The customer's pace: within the 5 requests/s the sync leaves, with room for its own jitter. */
const CLIENT_EVERY_MS = 250;

let fake: FakeProcess;
/** The API (which checks the key when the sync is created) and, apart, the sync worker. */
let svc: TestService | undefined;
let worker: TestService | undefined;
let account: TestAccount;

test.before(
  loudSetUp(
    async () => {
      // Enough for a backfill of several seconds at the sync's full share.
      fake = await startFakeProcess({ kind: 'stripe', key: KEY, customers: 40, seed: 11 });
      svc = await startTestService({ config: { roles: ['api'], secretKeyBase64: SECRET_KEY }, stripeUrl: fake.url });
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

test('the sync keeps to its share as Stripe counts it; a customer keeping to the rest sees no 429', async () => {
  const url = new URL(fake.url);
  const stripe = new Stripe(KEY, {
    host: url.hostname,
    port: Number(url.port),
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 0,
  });
  const created = await request(svc!.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: KEY } });
  assert.is(created.status, 201, created.text);
  const syncId: string = created.body.id;
  // The key check before the 201 is not the sync's, and counts against the account too: the
  // sync (and the customer) start in a worker of their own once it has left Stripe's window.
  await new Promise((r) => setTimeout(r, 1100));
  const from = (await fake.arrivals()).length;
  const refusedBefore = (await fake.stats()).rateLimited;
  worker = await startTestService({
    config: { roles: ['sync'], databaseUrl: svc!.controlUrl, secretKeyBase64: SECRET_KEY },
    tunables: { workerTickMs: 250 },
    stripeUrl: fake.url,
  });

  let backfilled = false;
  const failures: string[] = [];
  const customer = (async () => {
    while (!backfilled) {
      const sent = Date.now();
      try {
        await stripe.customers.list({ limit: 1 });
      } catch (error) {
        failures.push(String(error));
      }
      await new Promise((r) => setTimeout(r, Math.max(0, sent + CLIENT_EVERY_MS - Date.now())));
    }
  })();
  try {
    await waitBackfilled(svc!.api, account.token, syncId);
  } finally {
    backfilled = true;
    await customer;
  }

  const seen = (await fake.arrivals()).slice(from);
  // The service names itself Tributary/…; the customer's stripe-node, Stripe/….
  const sync = seen.filter((a) => a.agent.startsWith('Tributary/')).map((a) => a.at);
  const client = seen.filter((a) => a.agent.startsWith('Stripe/')).map((a) => a.at);
  const share = syncShare(KEY, false);
  const seconds = (Math.max(...sync) - Math.min(...sync)) / 1000;
  const summary = `${sync.length} sync requests over ${seconds.toFixed(1)} s, ${client.length} customer requests`;
  // A backfill long enough to run into its share many times over, or the test proves nothing.
  assert.ok(seconds >= 3 && sync.length >= 3 * share, summary);
  // The sync uses its share (the margin costs it 4 %), and never more in any second Stripe counts.
  assert.ok(peak(sync, 1000) >= share - 2, `the sync's busiest second had only ${peak(sync, 1000)} requests (${summary})`);
  // A failure says how they arrived (bunched within a few ms, or spread), and whether the
  // limiter's own log already held too many (its decision) or the requests came together
  // after it (sent late together, or stamped late together by a starved fake).
  if (peak(sync, 1000) > share) {
    const logged = await grantsLogged(svc!.controlUrl, 'stripe%', sync.length);
    assert.unreachable(
      `the fake counted ${peak(sync, 1000)} of the sync's requests in one second; its share is ${share} (${summary}); they arrived at ${peakWindow(sync, 1000)} ms; ${logged}`,
    );
  }
  // The customer kept to the rest, and was never refused.
  assert.ok(peak(client, 1000) <= stripeRule(KEY).limit - share, `the customer sent ${peak(client, 1000)} in one second`);
  assert.equal(failures, []);
  if (seen.some((a) => a.status === 429)) assert.unreachable(`refused with 429: ${await refusalsExplained(seen, svc!.controlUrl, 'stripe%')}`);
  assert.is((await fake.stats()).rateLimited, refusedBefore, 'no 429 from the fake');
});

test('the limiter: a share kept with the margin opens its next slot a window and the margin after its oldest grant', async () => {
  const pool = new pg.Pool({ connectionString: svc!.controlUrl });
  try {
    const limiter = new QuotaLimiter({ pool, marginMs: 200 });
    const rule = { limit: 5, windowMs: 1000 };
    const grantTimes = async (key: string, shareMargin: boolean) => {
      for (let i = 0; i < 4; i++) {
        const grant = await limiter.acquire(key, rule, { kind: 'sync', syncLimit: 3, shareMargin });
        grant.sent();
        grant.answered();
      }
      const { rows } = await pool.query<{ ms: number }>('SELECT extract(epoch FROM at) * 1000 AS ms FROM quota_requests WHERE key = $1 ORDER BY at', [key]);
      return rows.map((r) => Number(r.ms));
    };
    const [kept, exact] = await Promise.all([grantTimes('stripe:share-margin', true), grantTimes('airtable:share-exact', false)]);
    // As the upstream counts arrivals: the 4th never within a second (and its jitter) of the 1st.
    assert.ok(kept[3]! - kept[0]! >= 1200, `with the margin: 4th grant ${(kept[3]! - kept[0]!).toFixed(1)} ms after the 1st`);
    // Without it (Airtable's sweep share), exactly a window: a sync at 3 req/s gets 3.
    assert.ok(exact[3]! - exact[0]! >= 1000 && exact[3]! - exact[0]! < 1200, `exact share: 4th grant ${(exact[3]! - exact[0]!).toFixed(1)} ms after the 1st`);
  } finally {
    await pool.end();
  }
});

test.run();
