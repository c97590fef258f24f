/**
 * Anyone who reaches the proxy can name a base in the path. With a bogus token, or another
 * tenant's valid token that cannot read the base, they used to spend the base's quota: the
 * owner's next request got 429 at once and the sync's wait timed out. Now only a credential
 * known good for the base spends it as a client; the others share one request a window.
 * A Stripe key the upstream refuses costs one upstream request, never a lookup of its account.
 * The Airtable fake runs in its own process (harness/fake-process.ts), as its clock must be fair.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeStripe } from '../fakes/stripe/index.ts';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { waitForCycle } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { rawRequest, startProxy, type TestProxy } from './harness/proxy.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  loudSetUp,
  request,
  startHarnessStripe,
  startTestService,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

const BOGUS = 'patBOGUSBOGUSBOG.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const FOREIGN = 'patFOREIGNFOREIG.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const SECOND = 'patSECONDSECONDS.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

let svc: TestService;
let fake: FakeProcess;
let stripe: FakeStripe;
let proxy: TestProxy;
let account: TestAccount;
let syncId: string;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const listing = () => `/api.airtable.com/v0/${fake.id}/Big?pageSize=1`;
const get = (token: string) => rawRequest(proxy.url, 'GET', listing(), { headers: { authorization: `Bearer ${token}` } });

/** The sync's slots for the base between two moments, from the shared limiter's own log. */
/** How long the sync's pace is measured before a flood, as the reference. */
const REFERENCE_MS = 8000;

async function syncSlots(from: Date, to: Date): Promise<number> {
  const rows = await query<{ n: string }>(
    svc.controlUrl,
    "SELECT count(*) AS n FROM quota_requests WHERE key = $1 AND kind IN ('sync', 'urgent') AND at BETWEEN $2 AND $3",
    [fake.id, from, to],
  );
  return Number(rows[0]!.n);
}

/** `workers` clients sending the listing with `tokens` in turn, as fast as answers come, for `ms`. */
async function flood(ms: number, workers: number, tokens: string[]): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  const until = Date.now() + ms;
  let n = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < until) {
        const answer = await get(tokens[n++ % tokens.length]!);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      }
    }),
  );
  return statuses;
}

test.before(
  loudSetUp(
    async () => {
      fake = await startFakeProcess({ kind: 'airtable', token: AIRTABLE_TEST_TOKEN, records: 200 });
      await fake.addToken(FOREIGN, 'other');
      await fake.addToken(SECOND, 'base');
      stripe = await startHarnessStripe();
      const upstreams = new Map([
        ['api.airtable.com', fake.url],
        ['api.stripe.com', stripe.url],
      ]);
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder'], upstreams },
        stripeUrl: stripe.url,
        tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 0 }, workerTickMs: 250 },
      });
      account = await createAccount(svc);
      const created = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: fake.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(created.status, 201, created.text);
      syncId = created.body.id;
      proxy = await startProxy(svc, { upstreams });
      await waitForCycle(svc, account.token, syncId, new Date(0), 120_000);
    },
    () => svc,
  ),
);

test.after(async () => {
  await proxy?.stop();
  await svc?.stop();
  await stripe?.close();
  await fake?.close();
});

test('a flood of bogus and foreign tokens: the owner answered at once, the wait ok, the sync at its pace, no 429 upstream', async () => {
  // The sync sweeps continuously at its share (3 of 5 a second): its pace before the flood is the reference.
  const before = new Date();
  await sleep(REFERENCE_MS);
  const reference = await syncSlots(before, new Date());
  const refusedBefore = (await fake.stats()).rateLimited;
  const arrivalsBefore = (await fake.arrivals()).length;

  const started = new Date();
  const flooding = flood(6000, 40, [BOGUS, FOREIGN]);
  await sleep(500);
  const owner: Array<{ status: number; ms: number }> = [];
  for (let i = 0; i < 4; i++) {
    const t = performance.now();
    const answer = await get(AIRTABLE_TEST_TOKEN);
    owner.push({ status: answer.status, ms: performance.now() - t });
    await sleep(700);
  }
  const t = performance.now();
  const wait = await request(svc.api, 'GET', `/api/wait/${syncId}`, { token: account.token });
  const waitMs = performance.now() - t;
  const statuses = await flooding;
  const ended = new Date();
  const seconds = (ended.getTime() - started.getTime()) / 1000;

  assert.equal(
    owner.map((o) => o.status),
    [200, 200, 200, 200],
    'the owner is served',
  );
  assert.ok(Math.max(...owner.map((o) => o.ms)) < 1500, `the owner waited ${owner.map((o) => Math.round(o.ms)).join(', ')} ms`);
  assert.is(wait.status, 200, wait.text);
  assert.is(wait.body.ok, true, `the wait: ${wait.text}`);
  assert.ok(waitMs < 5000, `the wait took ${Math.round(waitMs)} ms`);

  // The flood: the upstream's own refusals (401, 403), or the proxy's 429 without going upstream.
  const total = [...statuses.values()].reduce((a, b) => a + b, 0);
  assert.ok(total >= 200, `the flood sent ${total} requests`);
  assert.equal([...statuses.keys()].sort(), [...new Set([401, 403, 429].filter((s) => statuses.has(s)))].sort(), `statuses ${JSON.stringify([...statuses])}`);
  // One unverified request per window reaches the upstream (and the first second may hold two).
  const arrived = (await fake.arrivals()).slice(arrivalsBefore).filter((a) => a.status === 401 || a.status === 403).length;
  assert.ok(arrived <= Math.ceil(seconds) + 2, `${arrived} bogus or foreign requests reached the upstream in ${seconds.toFixed(1)} s`);
  assert.is((await fake.stats()).rateLimited, refusedBefore, 'the upstream answered no 429');

  // Slots are whole: a window's edges fall between two, so its count may be one short of its
  // pace (at 3 a second, one slot is 8% of a 4 s window: that alone failed a run at 0.89).
  const during = await syncSlots(started, ended);
  const pace = (during + 1) / seconds / (reference / (REFERENCE_MS / 1000));
  assert.ok(
    pace >= 0.9,
    `the sync's pace during the flood was ${pace.toFixed(2)} of its pace before (${during} slots in ${seconds.toFixed(1)} s, ${reference} in ${REFERENCE_MS / 1000} s)`,
  );
});

test("a new client's valid token: its first request takes the small allowance, then it is known and served as a client", async () => {
  const flooding = flood(5000, 40, [BOGUS]);
  await sleep(300);
  // The first request may find the unverified allowance taken by the flood: the proxy says when to come back.
  let first = await get(SECOND);
  for (let i = 0; i < 10 && first.status === 429; i++) {
    await sleep(Number(first.headers['retry-after'] ?? 1) * 1000);
    first = await get(SECOND);
  }
  assert.is(first.status, 200, 'accepted upstream once');
  const times: number[] = [];
  for (let i = 0; i < 4; i++) {
    const t = performance.now();
    const answer = await get(SECOND);
    assert.is(answer.status, 200, `request ${i + 2} of the new client: ${answer.body.toString().slice(0, 200)}`);
    times.push(performance.now() - t);
    await sleep(300);
  }
  assert.ok(Math.max(...times) < 1500, `known now: ${times.map(Math.round).join(', ')} ms`);
  await flooding;
});

test('a Stripe key the upstream refuses costs one upstream request each, never a GET /v1/account', async () => {
  const lookups = stripe.stats.byPath('/v1/account').requests;
  const customers = stripe.stats.byPath('/v1/customers').requests;
  for (let i = 0; i < 5; i++) {
    const answer = await rawRequest(proxy.url, 'GET', '/v1/customers', { headers: { authorization: `Bearer sk_test_INVALIDINVALID${i}0000000` } });
    assert.is(answer.status, 401, answer.body.toString());
  }
  assert.is(stripe.stats.byPath('/v1/account').requests, lookups, 'no lookup for an invalid key');
  assert.is(stripe.stats.byPath('/v1/customers').requests, customers + 5, 'each request upstream once');
});

test.run();
