/**
 * Airtable's second limit is per user: 50 requests a second for all of one user's personal
 * access tokens together, across bases, with a 30 s lockout past it. Twenty bases of one user,
 * each synced with a token of its own (least privilege), by two accounts of ours (ten each).
 * Counted per token, the syncs would take 20 × 3 = 60 requests a second and the fake (in a
 * process of its own, as strict as Airtable) would lock the user out. Counted per user (learned
 * with whoami when each sync is created), the syncs share the 50: no 429, every base synced,
 * edits made in Airtable land, each base gets a fair share, the API and the console say the
 * syncs are slowed, and a client's proxied requests still go first.
 *
 * Measured (printed with TEST_VERBOSE=1, and kept in docs/airtable.md): the time to the first
 * complete cycle of all twenty bases, the change lag of edits, the user's peak rate.
 */
import { createHash } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeStripe } from '../fakes/stripe/index.ts';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { waitForCycle } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { rawRequest, startProxy, type TestProxy } from './harness/proxy.ts';
import { peak } from './harness/quota.ts';
import { createAccount, loudSetUp, request, startHarnessStripe, startTestService, type TestAccount, type TestService } from './harness/service.ts';

const USER = 'usrPERUSERsync001';
const BASES = 20;
const RECORDS = 150;

interface Synced {
  id: string;
  baseId: string;
  token: string;
  account: TestAccount;
  reader: string;
}

let svc: TestService;
let fake: FakeProcess;
let stripe: FakeStripe;
let proxy: TestProxy;
const syncs: Synced[] = [];
let createdAt = 0;
let firstCyclesSeconds = 0;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (line: string) => process.stdout.write(`  ${line}\n`);
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

test.before(
  loudSetUp(
    async () => {
      fake = await startFakeProcess({ kind: 'airtable-user', tokenPrefix: 'patPERUSER.', bases: BASES, records: RECORDS, user: USER });
      stripe = await startHarnessStripe();
      const upstreams = new Map([
        ['api.airtable.com', fake.url],
        ['api.stripe.com', stripe.url],
      ]);
      svc = await startTestService({
        config: { roles: ['api', 'sync'], upstreams },
        stripeUrl: stripe.url,
        // Sweeps at the full pace: the user's 50 requests a second must bind (never paced).
        tunables: { airtable: { pollIntervalMs: 1000, cycleGapMs: 0, pacedCycleMs: 0 }, workerTickMs: 250 },
      });
      const accounts = [await createAccount(svc, 'north'), await createAccount(svc, 'south')];
      createdAt = Date.now();
      for (const [i, base] of fake.bases!.entries()) {
        const account = accounts[i % 2]!;
        const created = await request(svc.api, 'POST', '/api/syncs', {
          token: account.token,
          body: { kind: 'airtable', base_id: base.id, api_key: base.token },
        });
        assert.is(created.status, 201, created.text);
        syncs.push({ id: created.body.id, baseId: base.id, token: base.token, account, reader: created.body.database.url });
      }
      proxy = await startProxy(svc, { upstreams });
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

test("each sync's token is known as the user's, from the check at creation", async () => {
  const rows = await query<{ owner_id: string; n: string }>(
    svc.controlUrl,
    "SELECT owner_id, count(*) AS n FROM credential_owners WHERE kind = 'airtable' GROUP BY owner_id",
  );
  assert.equal(
    rows.map((r) => [r.owner_id, Number(r.n)]),
    [[USER, BASES]],
  );
});

test('every base completes its first cycle, with no 429 from Airtable', async () => {
  await Promise.all(syncs.map((sync) => waitForCycle(svc, sync.account.token, sync.id, new Date(0), 180_000)));
  firstCyclesSeconds = (Date.now() - createdAt) / 1000;
  say(`first cycles of ${BASES} bases (${RECORDS} records each), from the first create: ${firstCyclesSeconds.toFixed(1)} s`);
  for (const sync of syncs) {
    const rows = await query<{ n: string }>(sync.reader, 'SELECT count(*) AS n FROM items');
    assert.is(Number(rows[0]!.n), RECORDS, `base ${sync.baseId}`);
  }
  const stats = await fake.stats();
  assert.is(stats.rateLimited, 0, `${stats.rateLimited} of ${stats.requests} answered 429: ${JSON.stringify(await fake.refusals()).slice(0, 2000)}`);
});

test('edits made in Airtable land in every base while the syncs share the 50', async () => {
  const lags: number[] = [];
  for (let round = 1; round <= 3; round++) {
    const pending = new Map<Synced, { at: number; text: string }>();
    for (const sync of syncs) {
      const text = `edit ${round} of ${sync.baseId}`;
      pending.set(sync, { at: (await fake.edit(sync.baseId, text)).at, text });
    }
    const deadline = Date.now() + 60_000;
    while (pending.size > 0 && Date.now() < deadline) {
      for (const [sync, edit] of pending) {
        const rows = await query<{ name: string }>(sync.reader, 'SELECT name FROM items WHERE name = $1', [edit.text]);
        if (rows.length === 0) continue;
        lags.push((Date.now() - edit.at) / 1000);
        pending.delete(sync);
      }
      await sleep(100);
    }
    assert.is(pending.size, 0, `edits not seen within 60 s: ${[...pending.keys()].map((s) => s.baseId).join(', ')}`);
    await sleep(2000);
  }
  say(
    `change lag of ${lags.length} edits (20 bases, 3 rounds): p50 ${percentile(lags, 50).toFixed(1)} s, ` +
      `p95 ${percentile(lags, 95).toFixed(1)} s, max ${Math.max(...lags).toFixed(1)} s`,
  );
  const stats = await fake.stats();
  assert.is(stats.rateLimited, 0, `${stats.rateLimited} of ${stats.requests} answered 429`);
});

test("the bases share the user's quota fairly, and it is the user's 50 that binds", async () => {
  const to = new Date();
  const from = new Date(to.getTime() - 10_000);
  const rows = await query<{ key: string; kind: string; ms: number }>(
    svc.controlUrl,
    'SELECT key, kind, extract(epoch FROM at) * 1000 AS ms FROM quota_requests WHERE at BETWEEN $1 AND $2',
    [from, to],
  );
  const perBase = syncs.map((sync) => rows.filter((r) => r.key === sync.baseId).length);
  const user = rows.filter((r) => r.key === `airtable-user:${USER}`);
  const times = user.map((r) => Number(r.ms));
  const syncTimes = user.filter((r) => r.kind !== 'client').map((r) => Number(r.ms));
  say(
    `over 10 s: the user's requests ${user.length} (${(user.length / 10).toFixed(1)} a second, peak ${peak(times, 1000)} in 1 s, ` +
      `the syncs' peak ${peak(syncTimes, 1000)}); per base ${Math.min(...perBase)}–${Math.max(...perBase)} ` +
      `(${(Math.min(...perBase) / 10).toFixed(1)}–${(Math.max(...perBase) / 10).toFixed(1)} a second)`,
  );
  assert.ok(peak(times, 1000) <= 48, `user peak ${peak(times, 1000)}`);
  // The bases would take 60 a second: the syncs' 40 of the user's 50 binds, and they use it.
  assert.ok(peak(syncTimes, 1000) <= 40, `the syncs' peak ${peak(syncTimes, 1000)}`);
  assert.ok(syncTimes.length >= 10 * 35, `${syncTimes.length} sync requests of the user in 10 s`);
  // Each base gets its fair share: none less than 0.6 of the busiest.
  assert.ok(Math.min(...perBase) >= 0.6 * Math.max(...perBase), `per base: ${perBase.join(' ')}`);
  const byToken = await query<{ n: string }>(svc.controlUrl, "SELECT count(*) AS n FROM quota_requests WHERE key LIKE 'airtable-token:%'");
  assert.ok(Number(byToken[0]!.n) <= BASES, `requests counted under a token rather than its user: ${byToken[0]!.n}`);
});

test('the API and the console say the syncs are slowed by the user limit', async () => {
  const sync = syncs[7]!;
  const view = await waitFor(
    'a slowed_by note',
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${sync.id}`, { token: sync.account.token });
      return answer.body.status.slowed_by ? answer.body : undefined;
    },
    40_000,
  );
  say(`slowed_by: ${view.status.slowed_by}`);
  assert.match(view.status.slowed_by, `all of user ${USER}'s tokens together`);
  assert.match(view.status.slowed_by, `syncs take at most 40 of them. The ${BASES} synced bases of that user would take up to 60 a second`);
  assert.is(view.status.indicator, 'normal');
  assert.match(view.status.reason, /slowed/);
  // The list (both accounts' syncs show it).
  const list = await request(svc.api, 'GET', '/api/syncs', { token: syncs[0]!.account.token });
  assert.ok(list.body.data.some((s: { status: { slowed_by: string | null } }) => s.status.slowed_by !== null));
});

test("a client's proxied requests go ahead of the user's syncs, and no 429 comes back", async () => {
  const sync = syncs[3]!;
  const times: number[] = [];
  // Three a second: within what the base leaves its clients (5 a second, the sync's 3 less
  // than that while the user's quota holds it back), so any wait would be the user's quota.
  for (let i = 0; i < 20; i++) {
    if (i > 0) await sleep(300);
    const started = performance.now();
    const answer = await rawRequest(proxy.url, 'GET', `/api.airtable.com/v0/${sync.baseId}/Items?pageSize=1`, {
      headers: { authorization: `Bearer ${sync.token}` },
    });
    assert.is(answer.status, 200, answer.body.toString());
    times.push(performance.now() - started);
  }
  say(`proxied reads while the user's syncs use the 50: p50 ${percentile(times, 50).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms`);
  assert.ok(percentile(times, 50) < 200, `p50 ${percentile(times, 50)} ms`);
  const stats = await fake.stats();
  assert.is(stats.rateLimited, 0, `${stats.rateLimited} of ${stats.requests} answered 429`);
});

test("a client's own token of the same user: learned after its first 2xx, then counted as the user's", async () => {
  const token = 'patPERUSER.client';
  await fake.addToken(token, 'base');
  const sync = syncs[11]!;
  const read = () => rawRequest(proxy.url, 'GET', `/api.airtable.com/v0/${sync.baseId}/Items?pageSize=1`, { headers: { authorization: `Bearer ${token}` } });
  assert.is((await read()).status, 200);
  const digest = createHash('sha256').update(token).digest('hex');
  await waitFor(
    "the client token's user",
    async () => {
      const rows = await query<{ owner_id: string }>(svc.controlUrl, 'SELECT owner_id FROM credential_owners WHERE credential_sha256 = $1', [digest]);
      return rows[0]?.owner_id === USER ? true : undefined;
    },
    10_000,
  );
  const since = new Date();
  for (let i = 0; i < 5; i++) assert.is((await read()).status, 200);
  const counted = await query<{ n: string }>(svc.controlUrl, "SELECT count(*) AS n FROM quota_requests WHERE key = $1 AND kind = 'client' AND at >= $2", [
    `airtable-user:${USER}`,
    since,
  ]);
  assert.ok(Number(counted[0]!.n) >= 5, `${counted[0]!.n} client requests counted under the user`);
  const stats = await fake.stats();
  assert.is(stats.rateLimited, 0, `${stats.rateLimited} of ${stats.requests} answered 429`);
});

test.run();
