/**
 * Connected accounts by push (TRIBUTARY_PUBLIC_URL set): the platform's sync registers a
 * Connect webhook endpoint at /hooks/stripe/<sync id>; a signed delivery wakes the reader of
 * the account it names, so a change arrives at once while each feed is otherwise read only
 * every pushedPollMs; a lost delivery is filled by that read. Unsigned, stale and replayed
 * deliveries are refused. The endpoint goes when the setting is turned off or the sync deleted.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { request as httpRequest } from 'node:http';
import pg from 'pg';
import Stripe from 'stripe';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { PING_CHANNEL } from '../src/sync/passes.ts';
import { freePort } from './harness/ports.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { request, startTestService } from './harness/service.ts';
import { backfilledStripeSync, politely, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const KEY = 'sk_test_CONNECTPUSHPLATFORM0001';
/** Each account's feed is read this often while push works: far longer than a delivery takes. */
const PUSHED_POLL_MS = 8000;
let s: StripeSyncSetUp;
let api: string;
let account: string;
const stripeNode = new Stripe('sk_test_signature0000000000000001');
/** Shared with a second API process of the same deployment, which must read the endpoint's sealed secret. */
const SECRET_KEY = Buffer.alloc(32, 7).toString('base64');

test.before(async () => {
  const apiPort = await freePort();
  api = `http://127.0.0.1:${apiPort}`;
  s = await backfilledStripeSync({
    key: KEY,
    seed: 62,
    customers: 3,
    pollIntervalMs: 300,
    settings: { connected_accounts: true },
    config: { roles: ['api', 'sync', 'decoder'], apiPort, publicOrigin: api, secretKeyBase64: SECRET_KEY },
    tunables: { stripe: { pollIntervalMs: 300, discoverAccountsMs: 500, pushedPollMs: PUSHED_POLL_MS } },
    before: async (stripe) => {
      account = (await stripe.accounts.create({ type: 'custom' })).id;
      await stripe.customers.create({ email: 'first@push.example.com' }, { stripeAccount: account });
    },
  });
});
test.after(async () => {
  await s.svc.stop();
  await s.fake.close();
});

const rows = (sql: string, params: unknown[] = []) => query<Record<string, any>>(s.reader, sql, params);
// The test's own requests share the key's limit with the sync: retried after a 429, as a client should.
const endpoints = async () => (await politely(() => s.stripe.webhookEndpoints.list())).data;
const hookUrl = () => `${api}/hooks/stripe/${s.syncId}`;

/** Whether `read` holds within `ms`. */
async function arrivesWithin(ms: number, read: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await read()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

test('the sync registers a Connect endpoint at its hook URL, every event, the pinned version', async () => {
  const [endpoint] = await waitFor('the endpoint', async () => ((await endpoints()).length > 0 ? endpoints() : undefined), 20_000);
  assert.is(endpoint!.url, hookUrl());
  assert.equal(endpoint!.enabled_events, ['*']);
  assert.is(endpoint!.api_version, STRIPE_API_VERSION);
  // Stripe sends no event for an endpoint: the table has the sync's own from the answer, without its secret.
  const [row] = await waitFor('its row', async () => {
    const found = await rows('SELECT url, secret FROM public.webhook_endpoint WHERE id = $1', [endpoint!.id]);
    return found.length > 0 ? found : undefined;
  });
  assert.equal(row, { url: hookUrl(), secret: null });
  await waitFor(
    'the first customer',
    async () => ((await rows("SELECT 1 FROM public.customer WHERE email = 'first@push.example.com'")).length ? true : undefined),
    20_000,
  );
  // Past the reads right after the backfill: from now on each feed waits PUSHED_POLL_MS between timed reads.
  await new Promise((r) => setTimeout(r, 2000));
});

test("a change arrives by push at once; held back, it waits for the account's timed read", async () => {
  const [customer] = (await s.stripe.customers.list({ limit: 1 }, { stripeAccount: account })).data;
  const named = (name: string) => async () => (await rows('SELECT name FROM public.customer WHERE id = $1', [customer!.id]))[0]?.name === name;
  const before = s.fake.webhooks.stats().delivered;
  await s.stripe.customers.update(customer!.id, { name: 'pushed' }, { stripeAccount: account });
  // Well within the 8 s between timed reads, with room for a busy machine.
  assert.ok(await arrivesWithin(4000, named('pushed')), 'a delivery wakes the account at once');
  assert.ok(s.fake.webhooks.stats().delivered > before);

  // Deliveries held: the change waits for the account's next timed read, no sooner than a few seconds.
  await new Promise((r) => setTimeout(r, 500));
  s.fake.webhooks.pause();
  await s.stripe.customers.update(customer!.id, { name: 'held' }, { stripeAccount: account });
  const quick = await arrivesWithin(1500, named('held'));
  s.fake.webhooks.discardHeld();
  s.fake.webhooks.resume();
  assert.not.ok(quick, 'without a delivery the change is not read at once (the feed is read every few seconds)');
  assert.ok(await arrivesWithin(PUSHED_POLL_MS + 4000, named('held')), 'the timed read fills the gap of a lost delivery');
});

test('a delivery that comes while the account is being read is not lost', async () => {
  const [customer] = (await s.stripe.customers.list({ limit: 1 }, { stripeAccount: account })).data;
  const named = (name: string) => async () => (await rows('SELECT name FROM public.customer WHERE id = $1', [customer!.id]))[0]?.name === name;
  // The read the first delivery wakes is answered as of its arrival, but only 1.5 s later.
  s.fake.faults.add({ match: { method: 'GET', path: '/v1/events', acting: account }, kind: 'late', delayMs: 1500 });
  await s.stripe.customers.update(customer!.id, { name: 'during-1' }, { stripeAccount: account });
  await waitFor('the slow read', async () => (s.fake.faults.active === 0 ? true : undefined), 5000);
  // Its delivery arrives while that read is still on its way back: the account is read again after it.
  await s.stripe.customers.update(customer!.id, { name: 'during-2' }, { stripeAccount: account });
  assert.ok(await arrivesWithin(1500 + 2500, named('during-2')), 'the second change is read right after the slow read');
});

test('unsigned, stale and replayed deliveries are refused and change nothing', async () => {
  const [endpoint] = await endpoints();
  const secret = s.upstream.webhookSecret(endpoint!.id);
  const payload = JSON.stringify({ id: 'evt_forged', object: 'event', account, type: 'customer.updated', data: { object: { id: 'cus_forged' } } });
  const post = (signature: string | undefined) =>
    fetch(hookUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(signature ? { 'stripe-signature': signature } : {}) },
      body: payload,
    });
  const now = Math.floor(Date.now() / 1000);
  assert.is((await post(undefined)).status, 401, 'unsigned');
  // Refused on its headers: a body that never comes is not waited for.
  for (const signature of [undefined, stripeNode.webhooks.generateTestHeaderString({ payload, secret, timestamp: now - 600 })]) {
    const answer = await new Promise<{ status?: number; connection?: string }>((resolve, reject) => {
      const req = httpRequest(hookUrl(), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': 64 * 1024, ...(signature ? { 'stripe-signature': signature } : {}) },
      });
      req.on('response', (res) => {
        res.resume();
        resolve({ status: res.statusCode, connection: res.headers.connection });
      });
      req.on('error', reject);
      req.flushHeaders();
      setTimeout(() => req.destroy(new Error('no answer before the body')), 10_000).unref();
    });
    assert.equal(answer, { status: 401, connection: 'close' }, signature ? 'stale, before its body' : 'unsigned, before its body');
  }
  assert.is((await post(stripeNode.webhooks.generateTestHeaderString({ payload, secret: 'whsec_wrong' }))).status, 401, 'another secret');
  assert.is((await post(stripeNode.webhooks.generateTestHeaderString({ payload, secret, timestamp: now - 600 }))).status, 401, 'ten minutes old');
  const fresh = stripeNode.webhooks.generateTestHeaderString({ payload, secret, timestamp: now });
  assert.is((await post(fresh)).status, 200, 'signed and fresh: it wakes the account');
  const replayed = await post(fresh);
  assert.is(replayed.status, 401, 'the same delivery again');
  assert.match(((await replayed.json()) as { error: { message: string } }).error.message, /received already/);
  // Entries that match nothing, put in front of the real signature, do not make it new.
  const [t, v1] = fresh.split(',') as [string, string];
  for (let i = 0; i < 5; i++) {
    const junk = `${i}`.repeat(64).slice(0, 64);
    assert.is((await post(`${t},v1=${junk},${v1}`)).status, 401, `the same delivery behind junk signature ${i}`);
  }
  // Nor does another API process of the deployment take it again.
  const other = await startTestService({ config: { databaseUrl: s.svc.controlUrl, roles: ['api'], secretKeyBase64: SECRET_KEY }, stripeUrl: s.fake.url });
  try {
    const there = await fetch(`${other.api}/hooks/stripe/${s.syncId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': fresh },
      body: payload,
    });
    assert.is(there.status, 401, 'the same delivery at another API process');
    const another = stripeNode.webhooks.generateTestHeaderString({ payload, secret, timestamp: now - 1 });
    assert.is(
      (await fetch(`${other.api}/hooks/stripe/${s.syncId}`, { method: 'POST', headers: { 'stripe-signature': another }, body: payload })).status,
      200,
      'a new delivery there',
    );
  } finally {
    await other.stop();
  }
  // A delivery only wakes a read: nothing it says is written.
  assert.equal(await rows("SELECT 1 FROM public.customer WHERE id = 'cus_forged'"), []);
  const nowhere = await fetch(`${api}/hooks/stripe/syn_nosuchsync`, { method: 'POST', headers: { 'stripe-signature': fresh }, body: payload });
  assert.is(nowhere.status, 404);
});

test('a flood of forged deliveries is refused cheaply: the sync and the API stay quick', async () => {
  // Each names the connected account, as a real delivery does: one that got through would wake its reader.
  const payload = (i: number) => JSON.stringify({ id: `evt_flood${i}`, object: 'event', account, type: 'customer.updated' });
  const forged = (i: number) =>
    fetch(hookUrl(), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'stripe-signature': stripeNode.webhooks.generateTestHeaderString({ payload: payload(i), secret: 'whsec_forger' }),
      },
      body: payload(i),
    }).then((r) => r.status);
  const timeOf = async (work: () => Promise<unknown>) => {
    const started = performance.now();
    await work();
    return performance.now() - started;
  };
  const view = async () => {
    const answer = await request(s.svc.api, 'GET', `/api/syncs/${s.syncId}`, { token: s.account.token });
    if (answer.status !== 200) throw new Error(`the sync's view answered ${answer.status}: ${answer.text}`);
  };
  const quiet: number[] = [];
  for (let i = 0; i < 20; i++) quiet.push(await timeOf(view));
  /** The sync's view, timed over and over while 50 clients send 3,000 requests. */
  const viewsDuring = async (send: (i: number) => Promise<number>) => {
    let flooding = true;
    const during: number[] = [];
    const meanwhile = (async () => {
      while (flooding) during.push(await timeOf(view));
    })();
    const statuses: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next < 3000) statuses.push(await send(next++));
      }),
    );
    flooding = false;
    await meanwhile;
    return { during, statuses };
  };
  const p = (list: number[], q: number) => [...list].sort((x, y) => x - y)[Math.min(list.length - 1, Math.floor(list.length * q))]!;
  /** Each flood with what it cost: the wake-ups it sent the sync's runner, and upstream requests. */
  const costed = async (send: (i: number) => Promise<number>) => {
    let pings = 0;
    const listener = new pg.Client({ connectionString: s.svc.controlUrl });
    await listener.connect();
    listener.on('notification', (n) => {
      if (n.channel === PING_CHANNEL && n.payload?.startsWith(s.syncId)) pings++;
    });
    await listener.query(`LISTEN ${PING_CHANNEL}`);
    const requests = s.fake.stats.requests;
    const started = performance.now();
    const flood = await viewsDuring(send);
    const seconds = (performance.now() - started) / 1000;
    const upstream = s.fake.stats.requests - requests;
    // A notification sent before the flood's last answer has reached this client by the time a
    // query it sends after them is answered: one connection's messages come in order.
    await listener.query('SELECT 1');
    await listener.end();
    return { ...flood, pings, upstream, seconds };
  };
  // The peer, in the same run: as many posts to no route at all, refused before any work.
  const control = await costed((i) => fetch(`${api}/hooks/nowhere`, { method: 'POST', body: payload(i) }).then((r) => r.status));
  assert.equal([...new Set(control.statuses)], [404], 'the peer: no such route');
  const flood = await costed(forged);
  assert.equal([...new Set(flood.statuses)], [401], 'every forged delivery refused');
  // A forged delivery wakes nothing, so it costs the upstream nothing: the sync's runner reads
  // only when woken or on its timer (one wake-up per delivery would read the account over and over).
  assert.is(flood.pings, 0, `no forged delivery woke the sync (${flood.upstream} upstream requests in ${flood.seconds.toFixed(1)} s of them)`);
  // The count is real: the same flood with one signed delivery among the posts counts its wake-up.
  const [endpoint] = await endpoints();
  const secret = s.upstream.webhookSecret(endpoint!.id);
  const genuine = await costed((i) =>
    i === 1500
      ? fetch(hookUrl(), {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'stripe-signature': stripeNode.webhooks.generateTestHeaderString({ payload: payload(i), secret }) },
          body: payload(i),
        }).then((r) => r.status)
      : fetch(`${api}/hooks/nowhere`, { method: 'POST', body: payload(i) }).then((r) => r.status),
  );
  assert.is(genuine.statuses.filter((status) => status === 200).length, 1);
  assert.is(genuine.pings, 1, 'the signed delivery woke the sync');
  // A flood of one signed delivery sent again, half of it behind junk signatures, costs what
  // that delivery does: it is taken once, and wakes the sync once.
  const again = payload(9999);
  const header = stripeNode.webhooks.generateTestHeaderString({ payload: again, secret });
  const [t, v1] = header.split(',') as [string, string];
  const replays = await costed((i) =>
    fetch(hookUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': i % 2 === 0 ? header : `${t},v1=${'f'.repeat(64)},${v1}` },
      body: again,
    }).then((r) => r.status),
  );
  assert.is(replays.statuses.filter((status) => status === 200).length, 1, 'the delivery taken once');
  assert.equal([...new Set(replays.statuses)].sort(), [200, 401], 'every other copy refused');
  assert.is(replays.pings, 1, `3,000 copies woke the sync once (${replays.upstream} upstream requests meanwhile)`);
  // And the API keeps answering: every view during the flood was a 200 (viewsDuring), within a
  // bound only a real fault reaches. How fast is not compared here: the flood's own clients
  // sign each forged body in this process, beside the service, so the view's times measure
  // them too (a p99 of 707 ms against the peer's 148 ms, and a median of 110 against 35, were
  // seen on a loaded machine with refusals as cheap as ever).
  assert.ok(
    p(flood.during, 0.5) < 1000,
    `a sync's view p50 ${p(flood.during, 0.5).toFixed(0)} ms during the flood, ${p(control.during, 0.5).toFixed(0)} ms during a flood of posts to no route, ${p(quiet, 0.5).toFixed(0)} ms before`,
  );
  // And the sync still catches up when asked.
  const waited = await request(s.svc.api, 'GET', `/api/wait/${s.syncId}?timeout=20000`, { token: s.account.token });
  assert.is(waited.body.ok, true);
});

test('the endpoint goes when the setting is turned off, and with the sync; so do strays at its URL', async () => {
  const off = await request(s.svc.api, 'PATCH', `/api/syncs/${s.syncId}`, { token: s.account.token, body: { settings: { connected_accounts: false } } });
  assert.is(off.status, 200);
  await waitFor('the endpoint deleted', async () => ((await endpoints()).length === 0 ? true : undefined), 20_000);
  await waitFor('its row deleted', async () => ((await rows('SELECT 1 FROM public.webhook_endpoint')).length === 0 ? true : undefined), 5_000);
  // What a runner stopped before Stripe's answer to its creation came leaves: an endpoint at the
  // sync's URL that the sync never recorded. Another of the account's, elsewhere, is not the sync's.
  const stray = () => politely(() => s.stripe.webhookEndpoints.create({ url: hookUrl(), enabled_events: ['*'], connect: true }));
  const before = await stray();
  const elsewhere = await politely(() => s.stripe.webhookEndpoints.create({ url: `${api}/elsewhere`, enabled_events: ['*'] }));
  const on = await request(s.svc.api, 'PATCH', `/api/syncs/${s.syncId}`, { token: s.account.token, body: { settings: { connected_accounts: true } } });
  assert.is(on.status, 200);
  const ids = async (url: string) => (await endpoints()).filter((e) => e.url === url).map((e) => e.id);
  const [made] = await waitFor(
    'the endpoint made again',
    async () => {
      const at = await ids(hookUrl());
      return at.length === 1 && at[0] !== before.id ? at : undefined;
    },
    20_000,
  );
  assert.ok(made, 'one endpoint at the URL: the new one, the stray removed before it was made');
  await stray();
  const deleted = await request(s.svc.api, 'DELETE', `/api/syncs/${s.syncId}`, { token: s.account.token });
  assert.ok(deleted.status < 300, deleted.text);
  await waitFor('the endpoints at its URL deleted with the sync', async () => ((await ids(hookUrl())).length === 0 ? true : undefined), 20_000);
  assert.equal(await ids(`${api}/elsewhere`), [elsewhere.id], 'an endpoint at another URL is left alone');
});

test.run();
