/**
 * How deliveries treat a receiver, against real HTTP receivers: Retry-After on 429 and 503 is
 * honoured (capped at the back-off's ceiling, and not cut short by the destination answering
 * elsewhere), max_per_second bounds attempts across all lanes, and an answer is read only so
 * far and waited for only so long.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../src/config.ts';
import { laneOf } from '../src/events/webhooks/lanes.ts';
import { parseRetryAfter } from '../src/events/webhooks/send.ts';
import { SharedBounds } from '../src/events/webhooks/shared-bounds.ts';
import { peak } from './harness/quota.ts';
import { FAST_SCHEDULE, FAST_TUNING, pause, type Receiver, request, startWebhookWorld, until, type Received, type WebhookWorld } from './harness/webhooks.ts';

let world: WebhookWorld;

test.before(async () => {
  world = await startWebhookWorld();
});

test.after(async () => {
  await world?.stop();
});

const topic = (syncId: string) => `svc.${syncId}.customer`;
const idOf = (r: Received) => (JSON.parse(r.body) as { id: string }).id;

// A full collection before each heap reading, so that it counts what is held, not garbage.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
const settledHeap = () => {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
};

test('Retry-After: delay-seconds or an HTTP-date', () => {
  const now = Date.parse('2024-05-01T12:00:00Z');
  assert.is(parseRetryAfter('120', now), 120_000);
  assert.is(parseRetryAfter('0', now), 0);
  assert.is(parseRetryAfter('Wed, 01 May 2024 12:00:30 GMT', now), 30_000);
  assert.is(parseRetryAfter('Wed, 01 May 2024 11:00:00 GMT', now), 0, 'a date past: now');
  assert.is(parseRetryAfter('-5', now), undefined);
  assert.is(parseRetryAfter('1.5', now), undefined);
  assert.is(parseRetryAfter('soon', now), undefined);
  assert.is(parseRetryAfter(undefined, now), undefined);
});

test('a 429 or 503 with Retry-After is retried no sooner than it says, however the rest of the destination fares', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  // Each record in a lane of its own, so that each waits only for itself.
  const lanes = 8;
  const taken = new Set<number>();
  const ownLane = (prefix: string) => {
    for (let i = 0; ; i++) {
      const lane = laneOf(`${prefix}${i}`, lanes);
      if (taken.has(lane)) continue;
      taken.add(lane);
      return `${prefix}${i}`;
    }
  };
  const [seconds, date, capped, ignored] = ['seconds', 'date', 'capped', 'ignored'].map(ownLane) as [string, string, string, string];
  const others = Array.from({ length: 3 }, () => ownLane('ok'));
  const answered = new Map<string, number>();
  receiver.behaviour = (body) => {
    const id = JSON.parse(body).id as string;
    const n = (answered.get(id) ?? 0) + 1;
    answered.set(id, n);
    if (n > 1 || id.startsWith('ok')) return 204;
    if (id === seconds) return { status: 429, headers: { 'retry-after': '2' } };
    if (id === date) return { status: 503, headers: { 'retry-after': new Date(Date.now() + 3_000).toUTCString() } };
    if (id === capped) return { status: 429, headers: { 'retry-after': '3600' } };
    return { status: 500, headers: { 'retry-after': '3600' } };
  };
  // A first retry's back-off is at most 50 ms: only Retry-After makes it wait longer, up to the 2.5 s ceiling.
  world.deliver(syncId, { schedule: { ...FAST_SCHEDULE, initialDelayMs: 50, maxDelayMs: 2_500 }, tuning: { ...FAST_TUNING, lanes } });
  const ids = [seconds, date, capped, ignored];
  await world.log(
    syncId,
    ids.map((id) => ({ id })),
  );
  await until('first attempts', () => ids.every((id) => answered.has(id)));
  // Other records answer 2xx meanwhile: the destination is up, which ends ordinary back-offs early.
  for (const id of others) {
    await world.log(syncId, [{ id }]);
    await pause(300);
  }
  await until('every retry', () => ids.every((id) => receiver.accepted.some((r) => idOf(r) === id)), 10_000);
  const gap = (id: string) => {
    const [first, second] = receiver.requests.filter((r) => idOf(r) === id);
    return second!.at - first!.at;
  };
  assert.ok(gap(seconds) >= 1_950, `Retry-After: 2 → ${gap(seconds)} ms`);
  // An HTTP-date has whole seconds: at least 2 s of the 3.
  assert.ok(gap(date) >= 1_950, `Retry-After: <date 3 s on> → ${gap(date)} ms`);
  assert.ok(gap(capped) >= 2_450 && gap(capped) < 5_000, `Retry-After: 3600 capped at the 2.5 s ceiling → ${gap(capped)} ms`);
  assert.ok(gap(ignored) < 1_500, `a 500's Retry-After is not a request to wait → ${gap(ignored)} ms`);
});

test('max_per_second bounds attempts across all lanes, and a change applies to the running delivery', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  const webhook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)], max_per_second: 5 });
  assert.is(webhook.max_per_second, 5);
  world.deliver(syncId);
  const started = Date.now();
  await world.log(
    syncId,
    Array.from({ length: 16 }, (_, i) => ({ id: `m${i}` })),
  );
  await until('all sixteen', () => receiver.accepted.length === 16, 15_000);
  const times = receiver.requests.map((r) => r.at);
  const took = times[times.length - 1]! - started;
  assert.ok(took >= 2_700, `16 events at 5 a second took ${took} ms`);
  // 5 a second and a burst of 1; one more for a stalled event loop sending two at once.
  const mostInASecond = Math.max(...times.map((t) => times.filter((u) => u >= t && u < t + 1000).length));
  assert.ok(mostInASecond <= 7, `${mostInASecond} attempts within one second`);

  const unlimited = await world.changed(webhook.id, () =>
    request(world.apiUrl, 'PATCH', `/api/syncs/${syncId}/webhooks/${webhook.id}`, {
      token: world.account.token,
      body: { max_per_second: null },
    }),
  );
  assert.is(unlimited.status, 200, unlimited.text);
  assert.is(unlimited.body.max_per_second, null);
  const from = Date.now();
  await world.log(
    syncId,
    Array.from({ length: 40 }, (_, i) => ({ id: `u${i}` })),
  );
  await until('forty more', () => receiver.accepted.length === 56, 10_000);
  assert.ok(Date.now() - from < 4_000, `unlimited: ${Date.now() - from} ms for 40 (8 s at 5 a second)`);
});

/** The most attempts that arrived within any one second, over every receiver given. */
const mostInASecond = (...receivers: Receiver[]) =>
  peak(
    receivers.flatMap((r) => r.requests.map((q) => q.at)),
    1000,
  );

test('attempts to one host are bounded across webhooks of every sync, recovery included', async () => {
  const bounds = new SharedBounds({ perHost: 20, perAccount: 10_000, heldPerAccount: 20_000 });
  const [first, second] = [await world.newSync(), await world.newSync()];
  const [a, b] = [await world.receiver(), await world.receiver()];
  const hookA = await world.createWebhook(first, { url: a.url, topics: [topic(first)] });
  await world.createWebhook(second, { url: b.url, topics: [topic(second)] });
  world.deliver(first, { bounds });
  world.deliver(second, { bounds });
  const since = new Date(Date.now() - 1000).toISOString();
  const started = Date.now();
  await world.log(
    first,
    Array.from({ length: 30 }, (_, i) => ({ id: `h${i}` })),
  );
  await world.log(
    second,
    Array.from({ length: 30 }, (_, i) => ({ id: `h${i}` })),
  );
  await until('all sixty', () => a.accepted.length + b.accepted.length === 60, 15_000);
  const took = Date.now() - started;
  // 20 a second to 127.0.0.1 and a burst of 2: sixty take at least 2.9 s, whichever webhook sends.
  assert.ok(took >= 2_800, `60 attempts to one host at 20 a second took ${took} ms`);
  assert.ok(mostInASecond(a, b) <= 23, `${mostInASecond(a, b)} attempts to one host within one second`);
  // A recovery sends its backlog through the same bound.
  const recovered = await request(world.apiUrl, 'POST', `/api/syncs/${first}/webhooks/${hookA.id}/recover`, { token: world.account.token, body: { since } });
  assert.is(recovered.status, 202, recovered.text);
  const from = Date.now();
  await until('thirty again', () => a.accepted.length === 60, 15_000);
  assert.ok(Date.now() - from >= 1_300, `a recovery of 30 at 20 a second took ${Date.now() - from} ms`);
  assert.ok(mostInASecond(a, b) <= 23, `${mostInASecond(a, b)} attempts within one second, recovery included`);
});

test('a replay of exhausted deliveries goes out through the same bound', async () => {
  const bounds = new SharedBounds({ perHost: 20, perAccount: 10_000, heldPerAccount: 20_000 });
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  receiver.behaviour = () => 500;
  const hook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  // One attempt each: every delivery is exhausted at its first failure.
  world.deliver(syncId, { bounds, schedule: { ...FAST_SCHEDULE, maxAttempts: 1 } });
  await world.log(
    syncId,
    Array.from({ length: 40 }, (_, i) => ({ id: `r${i}` })),
  );
  const exhausted = async () =>
    (await world.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE destination_id = $1 AND status = 'exhausted'", [hook.id]))
      .rows[0]!.n;
  await until('all forty exhausted', async () => (await exhausted()) === 40, 15_000);
  receiver.behaviour = () => 200;
  const asked = await request(world.apiUrl, 'POST', `/api/syncs/${syncId}/webhooks/${hook.id}/deliveries/replay`, { token: world.account.token });
  assert.is(asked.status, 202, asked.text);
  assert.is(asked.body.replayed, 40);
  const from = Date.now();
  await until('all forty delivered', () => receiver.accepted.length === 40, 15_000);
  // 20 a second and a burst of 2: forty take at least 1.9 s.
  assert.ok(Date.now() - from >= 1_800, `a replay of 40 at 20 a second took ${Date.now() - from} ms`);
  assert.ok(mostInASecond(receiver) <= 23, `${mostInASecond(receiver)} attempts within one second, the replay included`);
});

test("attempts of one account are bounded across its webhooks' hosts", async () => {
  const bounds = new SharedBounds({ perHost: 10_000, perAccount: 20, heldPerAccount: 20_000 });
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  // Two hosts for one receiver: the account's bound counts both.
  await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  await world.createWebhook(syncId, { url: receiver.url.replace('127.0.0.1', 'localhost'), topics: [topic(syncId)] });
  world.deliver(syncId, { bounds });
  const started = Date.now();
  await world.log(
    syncId,
    Array.from({ length: 30 }, (_, i) => ({ id: `p${i}` })),
  );
  await until('both webhooks, thirty each', () => receiver.accepted.length === 60, 15_000);
  assert.ok(Date.now() - started >= 2_800, `60 attempts of one account at 20 a second took ${Date.now() - started} ms`);
  assert.ok(mostInASecond(receiver) <= 23, `${mostInASecond(receiver)} attempts of one account within one second`);
});

test("an account's webhooks hold only their parts of its bound in memory while their receivers stall, and lose nothing", async () => {
  // Once, each webhook held 10,000 events while its receiver was slow: ten of one account's
  // took the service from 225 MB to 1.3 GB. Now the account's webhooks share its bound.
  const bounds = new SharedBounds({ perHost: 10_000, perAccount: 10_000, heldPerAccount: 100 });
  const syncId = await world.newSync();
  const receivers = [await world.receiver(), await world.receiver()];
  for (const receiver of receivers) {
    receiver.behaviour = () => 'hold';
    await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  }
  // The held answers come long before a timeout: the lanes stay in memory mode, reading ahead.
  world.deliver(syncId, { bounds, schedule: { ...FAST_SCHEDULE, timeoutMs: 120_000 } });
  const heapBefore = settledHeap();
  const total = 4_000;
  const pad = 'x'.repeat(4096);
  for (let from = 0; from < total; from += 500) {
    await world.log(
      syncId,
      Array.from({ length: 500 }, (_, i) => ({ id: `m${from + i}`, data: { pad } })),
    );
  }
  await until('every lane of both webhooks waiting on its receiver', () => receivers.every((r) => r.held === FAST_TUNING.lanes));
  // Reading as far ahead as allowed takes a few reads of the log; unbounded, each webhook read all 4,000 (16 MB) in well under this.
  await pause(2_000);
  const grown = settledHeap() - heapBefore;
  assert.ok(grown < 8 * 1024 * 1024, `the heap grew by ${(grown / 1024 / 1024).toFixed(1)} MB while two webhooks' receivers stalled`);
  for (const receiver of receivers) {
    receiver.behaviour = () => 204;
    receiver.release();
  }
  await until('every event at both webhooks', () => receivers.every((r) => new Set(r.accepted.map(idOf)).size === total), 60_000);
});

test("the bounds across webhooks are the operator's: 1,000 a host, 2,000 an account, 20,000 held and 256 in flight unless the environment says", () => {
  assert.equal(loadConfig({}, {}).webhookBounds, { perHost: 1_000, perAccount: 2_000, heldPerAccount: 20_000, inFlightPerAccount: 256 });
  const set = loadConfig(
    {
      TRIBUTARY_WEBHOOK_MAX_PER_HOST_PER_SECOND: '50',
      TRIBUTARY_WEBHOOK_MAX_PER_ACCOUNT_PER_SECOND: '80',
      TRIBUTARY_WEBHOOK_MAX_HELD_EVENTS_PER_ACCOUNT: '500',
      TRIBUTARY_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT: '32',
    },
    {},
  );
  assert.equal(set.webhookBounds, { perHost: 50, perAccount: 80, heldPerAccount: 500, inFlightPerAccount: 32 });
  for (const name of [
    'TRIBUTARY_WEBHOOK_MAX_PER_HOST_PER_SECOND',
    'TRIBUTARY_WEBHOOK_MAX_HELD_EVENTS_PER_ACCOUNT',
    'TRIBUTARY_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT',
  ]) {
    assert.throws(() => loadConfig({ [name]: '0' }, {}), new RegExp(`${name} must be a whole number of at least 1`));
  }
});

test('an endless answer is read only to 4 KiB and the connection closed; one that never comes times out', async () => {
  const syncId = await world.newSync();
  const endless = await world.receiver();
  const silent = await world.receiver();
  endless.behaviour = () => 'stream';
  silent.behaviour = () => 'hang';
  const streamed = await world.createWebhook(syncId, { url: endless.url, topics: [topic(syncId)] });
  const hung = await world.createWebhook(syncId, { url: silent.url, topics: [topic(syncId)] });
  world.deliver(syncId, { schedule: { ...FAST_SCHEDULE, maxAttempts: 1, timeoutMs: 1_500 } });
  const started = Date.now();
  const [key] = await world.log(syncId, [{ id: 's1' }]);
  await until('the endless answer cut off', () => endless.streamed[0]?.closed === true, 5_000);
  assert.ok(Date.now() - started < 1_500, `cut off after ${Date.now() - started} ms, before the timeout`);
  // The sender read 4 KiB and closed; what the receiver wrote meanwhile is what socket buffers took.
  assert.ok(endless.streamed[0]!.bytes < 64 * 1024 * 1024, `${endless.streamed[0]!.bytes} bytes written`);
  const shown = async (id: string) => (await request(world.apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${id}`, { token: world.account.token })).body;
  await until('counted delivered', async () => (await shown(streamed.id)).deliveries.delivered === 1);
  assert.is((await shown(streamed.id)).deliveries.failed_attempts, 0, 'a 200 is a 200, however long its body');

  await until('the silent one exhausted', async () => (await shown(hung.id)).deliveries.exhausted === 1, 5_000);
  const [row] = (await request(world.apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${hung.id}/deliveries?status=exhausted`, { token: world.account.token }))
    .body.data;
  assert.is(row.event_id, key);
  assert.match(row.last_error, /timed out after 1500 ms/);
  assert.is(row.last_status_code, null);
  assert.ok(Date.parse(row.last_attempt_at) - started < 3_000);
});

test.run();
