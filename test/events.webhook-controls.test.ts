/**
 * What a webhook's owner controls after creating it, against real deliveries: secret rotation
 * (both signatures, either secret verifies, until the old one expires), disabling (410 Gone,
 * failing for long, by request) and enabling again without losing events, and recovery
 * (events since a time sent again, with their webhook-ids).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { AttemptResult } from '../src/events/webhooks/attempts.ts';
import { DestinationHealth } from '../src/events/webhooks/health.ts';
import { FAST_TUNING, pause, request, startWebhookWorld, taken, until, verifies, type Received, type WebhookWorld } from './harness/webhooks.ts';

const RETENTION_MS = 3_600_000;
let world: WebhookWorld;

test.before(async () => {
  world = await startWebhookWorld({ eventRetentionMs: RETENTION_MS });
});

test.after(async () => {
  await world?.stop();
});

const topic = (syncId: string) => `svc.${syncId}.customer`;
const route = (syncId: string, webhookId: string, rest = '') => `/api/syncs/${syncId}/webhooks/${webhookId}${rest}`;
const call = (method: string, path: string, body?: unknown) =>
  request(world.apiUrl, method, path, { token: world.account.token, ...(body !== undefined ? { body } : {}) });

/** A received delivery with only one of its signatures: which secret made that one. */
const part = (received: Received, index: number): Received => ({ ...received, signature: received.signature.split(' ')[index]! });

/** Each event's first 2xx receipt, in the order received (a repeat keeps its webhook-id). */
const firstReceipts = (received: Received[]) => {
  const ok = received.filter((r) => r.status < 300);
  return ok.filter((r, i) => ok.findIndex((x) => x.id === r.id) === i);
};

function perRecord(received: Received[]): Record<string, unknown[]> {
  const map: Record<string, unknown[]> = {};
  for (const event of taken(received)) (map[event.id] ??= []).push(event.n);
  return map;
}

// ── rotation ──────────────────────────────────────────────────────────────

test('a rotated secret: both signatures until the old one expires (checked when signing), then the new alone', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  const webhook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  const first = webhook.secret;
  // No periodic reload: only the rotation's wakeup, and the signer's own clock.
  world.deliver(syncId, { tuning: { ...FAST_TUNING, refreshMs: 60_000 } });
  await world.log(syncId, [{ id: 'a' }]);
  await until('one', () => receiver.accepted.length === 1);
  assert.ok(verifies(first, receiver.accepted[0]!));
  assert.not.match(receiver.accepted[0]!.signature, / /);

  const rotated = await world.changed(webhook.id, () => call('POST', route(syncId, webhook.id, '/rotate-secret'), { previous_expires_in: 2 }));
  assert.is(rotated.status, 200, rotated.text);
  assert.equal(Object.keys(rotated.body).sort(), ['previous_expires_at', 'secret']);
  const second = rotated.body.secret as string;
  assert.match(second, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.is.not(second, first);
  const expires = Date.parse(rotated.body.previous_expires_at);
  assert.ok(Math.abs(expires - (Date.now() + 2000)) < 1500, rotated.body.previous_expires_at);
  const shown = await call('GET', route(syncId, webhook.id));
  assert.is(shown.body.previous_secret_expires_at, rotated.body.previous_expires_at);
  assert.not.ok(JSON.stringify(shown.body).includes(second.slice(6)));

  await world.log(syncId, [{ id: 'a' }]);
  await until('two', () => receiver.accepted.length === 2);
  const both = receiver.accepted[1]!;
  assert.match(both.signature, /^v1,[A-Za-z0-9+/=]+ v1,[A-Za-z0-9+/=]+$/);
  assert.ok(verifies(second, both), 'a receiver with the new secret accepts it');
  assert.ok(verifies(first, both), 'a receiver still on the old secret accepts it');
  assert.ok(verifies(second, part(both, 0)) && verifies(first, part(both, 1)), 'the new signature first');

  await until('the old secret expired', () => Date.now() > expires + 100, 5_000);
  await world.log(syncId, [{ id: 'a' }]);
  await until('three', () => receiver.accepted.length === 3);
  const after = receiver.accepted[2]!;
  assert.not.match(after.signature, / /);
  assert.ok(verifies(second, after));
  assert.not.ok(verifies(first, after), 'the old secret no longer verifies');
  assert.not.ok(world.logs.text.includes(second.slice(6)), 'the secret is never logged');
});

test('several rotations keep only the latest replaced secret; 0 keeps none; each is sealed apart', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  const webhook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  world.deliver(syncId);
  const secrets = [webhook.secret];
  for (let i = 0; i < 2; i++) {
    const rotated = await world.changed(webhook.id, () => call('POST', route(syncId, webhook.id, '/rotate-secret')));
    assert.is(rotated.status, 200, rotated.text);
    // The default: a day.
    assert.ok(Math.abs(Date.parse(rotated.body.previous_expires_at) - (Date.now() + 86_400_000)) < 60_000);
    secrets.push(rotated.body.secret);
  }
  await world.log(syncId, [{ id: 'b' }]);
  await until('one', () => receiver.accepted.length === 1);
  const received = receiver.accepted[0]!;
  assert.equal(
    secrets.map((secret) => verifies(secret, received)),
    [false, true, true],
    'the latest and the one it replaced',
  );
  const { rows } = await world.pool.query<{ secret_enc: string; previous_secret_enc: string; secret_version: string }>(
    'SELECT secret_enc, previous_secret_enc, secret_version FROM webhook_destinations WHERE id = $1',
    [webhook.id],
  );
  assert.is(rows[0]!.secret_version, '2');
  assert.not.ok(rows[0]!.previous_secret_enc.includes(secrets[1]!.slice(6, 20)));
  assert.throws(() => world.box.decrypt(rows[0]!.previous_secret_enc, `webhook_destinations:${webhook.id}:secret`), 'its own associated data');

  const none = await world.changed(webhook.id, () => call('POST', route(syncId, webhook.id, '/rotate-secret'), { previous_expires_in: 0 }));
  assert.is(none.status, 200, none.text);
  assert.is(none.body.previous_expires_at, null);
  await world.log(syncId, [{ id: 'b' }]);
  await until('two', () => receiver.accepted.length === 2);
  assert.not.match(receiver.accepted[1]!.signature, / /);
  assert.ok(verifies(none.body.secret, receiver.accepted[1]!));
  assert.not.ok(verifies(secrets[2]!, receiver.accepted[1]!));
  assert.is((await call('GET', route(syncId, webhook.id))).body.previous_secret_expires_at, null);

  const cases: Array<[unknown, number, RegExp]> = [
    [{ previous_expires_in: -1 }, 400, /previous_expires_in: must be from 0 to 604800 seconds/],
    [{ previous_expires_in: 604_801 }, 400, /previous_expires_in: must be from 0 to 604800 seconds/],
    [{ previous_expires_in: '60' }, 400, /previous_expires_in: Expected number/],
    [{ expires: 1 }, 400, /Unrecognized key\(s\) in object: 'expires'/],
  ];
  for (const [body, status, message] of cases) {
    const answer = await call('POST', route(syncId, webhook.id, '/rotate-secret'), body);
    assert.is(answer.status, status, answer.text);
    assert.match(answer.body.error.message, message);
  }
  assert.is((await call('GET', route(syncId, webhook.id))).body.previous_secret_expires_at, null, 'a refused rotation changes nothing');
  assert.is((await call('DELETE', route(syncId, webhook.id))).status, 200);
  const deleted = await call('POST', route(syncId, webhook.id, '/rotate-secret'));
  assert.is(deleted.status, 404);
  assert.match(deleted.body.error.message, new RegExp(`webhook ${webhook.id} not found`));
});

// ── disabling ─────────────────────────────────────────────────────────────

test('the failing run: a 410 disables at once, failures only past the limit, any success starts it again', () => {
  const at = (ms: number, status: number): AttemptResult => ({
    ok: status < 300,
    statusCode: status,
    error: undefined,
    at: new Date(ms),
    retryAfterMs: undefined,
    gone: status === 410,
  });
  const health = new DestinationHealth(null, 1000);
  assert.is(health.record(at(0, 500)), undefined);
  assert.is(health.record(at(999, 503)), undefined);
  assert.is(health.record(at(1000, 200)), undefined, 'a success');
  assert.is(health.failingSince, null);
  assert.is(health.record(at(1500, 500)), undefined);
  assert.is(health.record(at(2499, 500)), undefined);
  assert.match(health.record(at(2500, 500))!, /every attempt has failed since 1970-01-01T00:00:01\.500Z/);
  assert.match(new DestinationHealth(null, 1000).record(at(0, 410))!, /410 Gone/);
  // Saved before a restart: the run goes on from there.
  assert.ok(new DestinationHealth(new Date(0), 1000).record(at(1000, 500)));
});

test('a destination answering 410 is disabled and told; the others keep every event; enabled again it gets what it missed', async () => {
  const syncId = await world.newSync();
  const otherSync = await world.newSync();
  const [gone, fine, elsewhere] = [await world.receiver(), await world.receiver(), await world.receiver()];
  gone.behaviour = () => 410;
  const goneHook = await world.createWebhook(syncId, { url: gone.url, topics: [topic(syncId)] });
  const fineHook = await world.createWebhook(syncId, { url: fine.url, topics: [topic(syncId)] });
  await world.createWebhook(otherSync, { url: elsewhere.url, topics: [topic(otherSync)] });
  world.deliver(syncId);
  world.deliver(otherSync);
  const records = ['r1', 'r2', 'r3', 'r4', 'r5'];
  await world.log(
    syncId,
    records.map((id) => ({ id })),
  );
  await world.log(otherSync, [{ id: 'o1' }]);
  await until('disabled', async () => (await call('GET', route(syncId, goneHook.id))).body.state === 'disabled');
  const shown = (await call('GET', route(syncId, goneHook.id))).body;
  assert.match(shown.disabled_reason, /it answered 410 Gone/);
  assert.ok(Date.now() - Date.parse(shown.disabled_at) < 10_000);
  const listed = (await call('GET', `/api/syncs/${syncId}/webhooks`)).body.data;
  assert.equal(
    listed.map((w: { id: string; state: string }) => [w.id, w.state]).sort(),
    [
      [goneHook.id, 'disabled'],
      [fineHook.id, 'enabled'],
    ].sort(),
  );
  await until('the other destination took everything', () => fine.accepted.length === records.length);
  await until('the other sync too', () => elsewhere.accepted.length === 1);
  // Whatever lanes were mid-attempt when the 410 came; nothing after.
  const goneAttempts = gone.requests.length;
  assert.ok(goneAttempts >= 1 && goneAttempts <= FAST_TUNING.lanes, `${goneAttempts} attempts`);

  // Told: a warning, the sync's recent errors (the console's), and /metrics.
  assert.match(world.logs.text, new RegExp(`"destination":"${goneHook.id}".*webhook destination disabled`));
  const history = await call('GET', `/api/syncs/${syncId}/history`);
  assert.is(history.status, 200, history.text);
  const noted = history.body.errors.filter((e: { message: string }) => e.message.includes(goneHook.id));
  assert.is(noted.length, 1);
  assert.match(noted[0].message, /disabled: it answered 410 Gone\. Nothing is sent to it until it is enabled again/);
  const metrics = await request(world.apiUrl, 'GET', '/metrics', { token: world.adminToken });
  assert.is(metrics.status, 200);
  assert.match(metrics.text, new RegExp(`tributary_webhook_destinations\\{sync_id="${syncId}",state="disabled"\\} 1\\n`));
  assert.match(metrics.text, new RegExp(`tributary_webhook_destinations\\{sync_id="${syncId}",state="enabled"\\} 1\\n`));
  assert.match(metrics.text, new RegExp(`tributary_webhook_destinations\\{sync_id="${otherSync}",state="disabled"\\} 0\\n`));

  // Logged while it is disabled: kept for it.
  await world.log(syncId, [{ id: 'r1' }, { id: 'r6' }]);
  await until('the other one has them', () => fine.accepted.length === records.length + 2);
  await pause(300);
  assert.is(gone.requests.length, goneAttempts, 'nothing sent while disabled');

  gone.behaviour = () => 204;
  const enabled = await call('PATCH', route(syncId, goneHook.id), { enabled: true });
  assert.is(enabled.status, 200, enabled.text);
  assert.equal([enabled.body.state, enabled.body.disabled_reason, enabled.body.disabled_at], ['enabled', null, null]);
  await until('everything it missed', () => gone.accepted.length === records.length + 2);
  assert.equal(perRecord(gone.accepted), perRecord(fine.accepted), 'the same events, in the same order per record');
  assert.equal(new Set(gone.accepted.map((r) => r.id)), new Set(fine.accepted.map((r) => r.id)), 'with the same webhook-ids');

  const off = await call('PATCH', route(syncId, goneHook.id), { enabled: false });
  assert.equal([off.body.state, off.body.disabled_reason], ['disabled', 'disabled by request']);
  await pause(300);
  await world.log(syncId, [{ id: 'r7' }]);
  await until('the other one', () => fine.accepted.length === records.length + 3);
  await pause(300);
  assert.is(gone.accepted.length, records.length + 2);
  const again = await call('GET', `/api/syncs/${syncId}/history`);
  assert.is(again.body.errors.filter((e: { message: string }) => e.message.includes(goneHook.id)).length, 1, 'disabling by request is no error');
});

test('a destination whose every attempt fails for the operator’s limit is disabled', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  receiver.behaviour = () => 500;
  const webhook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  const started = Date.now();
  world.deliver(syncId, { tuning: { ...FAST_TUNING, disableAfterMs: 1_500 } });
  await world.log(syncId, [{ id: 'f1' }, { id: 'f2' }]);
  await until('disabled', async () => (await call('GET', route(syncId, webhook.id))).body.state === 'disabled', 10_000);
  assert.ok(Date.now() - started >= 1_500);
  const shown = (await call('GET', route(syncId, webhook.id))).body;
  assert.match(shown.disabled_reason, /^every attempt has failed since \d{4}-\d\d-\d\dT/);
  const tried = receiver.requests.length;
  assert.ok(tried > 2, `${tried} attempts`);
  await pause(500);
  assert.is(receiver.requests.length, tried, 'nothing more is tried');
  // Enabled again, it starts a fresh count and delivers what it failed to.
  receiver.behaviour = () => 200;
  assert.is((await call('PATCH', route(syncId, webhook.id), { enabled: true })).status, 200);
  await until('delivered', () => receiver.accepted.length === 2);
  assert.is((await call('GET', route(syncId, webhook.id))).body.state, 'enabled');
});

// ── recovery ──────────────────────────────────────────────────────────────

test('recover sends again, in order and with the same webhook-ids, every event since a time, and moves on', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  const webhook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  world.deliver(syncId);
  const before = new Date(Date.now() - 1000).toISOString();
  const first = await world.log(syncId, [{ id: 'a' }, { id: 'b' }, { id: 'a' }, { id: 'c' }]);
  await until('the first batch', () => receiver.accepted.length === 4);
  await pause(50);
  const since = new Date().toISOString();
  await pause(50);
  // b fails for a while: its events are queued when the recovery comes.
  receiver.behaviour = (body) => (JSON.parse(body).id === 'b' ? 500 : 204);
  const second = await world.log(syncId, [{ id: 'b' }, { id: 'a' }, { id: 'b' }, { id: 'c' }]);
  await until('a and c of the second batch', () => receiver.accepted.length === 6);
  await until('b queued', async () => {
    const { rows } = await world.pool.query("SELECT 1 FROM webhook_deliveries WHERE destination_id = $1 AND status = 'retrying'", [webhook.id]);
    return rows.length > 0;
  });
  const { rows: seqs } = await world.pool.query<{ seq: string }>('SELECT seq FROM events WHERE event_key = $1', [second[0]]);

  const mark = receiver.requests.length;
  const recovered = await call('POST', route(syncId, webhook.id, '/recover'), { since });
  assert.is(recovered.status, 202, recovered.text);
  assert.equal(recovered.body, { id: webhook.id, since, from_seq: seqs[0]!.seq, state: 'enabled' });
  receiver.behaviour = () => 204;
  const since1 = () => firstReceipts(receiver.requests.slice(mark));
  await until('the second batch again', () => second.every((key) => since1().some((r) => r.id === key)));
  await pause(300);
  assert.not.ok(
    since1().some((r) => first.includes(r.id)),
    'nothing from before `since`',
  );
  assert.equal(perRecord(since1()), { b: [5, 7], a: [6], c: [8] }, 'in log order per record');

  // Everything since a time before the first batch, a disabled webhook enabled by it; then new events follow.
  assert.is((await call('PATCH', route(syncId, webhook.id), { enabled: false })).status, 200);
  const mark2 = receiver.requests.length;
  const all = await call('POST', route(syncId, webhook.id, '/recover'), { since: before });
  assert.is(all.status, 202, all.text);
  assert.is(all.body.state, 'enabled');
  assert.is((await call('GET', route(syncId, webhook.id))).body.state, 'enabled');
  const third = await world.log(syncId, [{ id: 'd' }]);
  const keys = [...first, ...second, ...third];
  const since2 = () => firstReceipts(receiver.requests.slice(mark2));
  await until('all of it', () => keys.every((key) => since2().some((r) => r.id === key)));
  assert.equal(perRecord(since2()), { a: [1, 3, 6], b: [2, 5, 7], c: [4, 8], d: [9] });
});

test('recover refuses a time in the future, past the retention, or not a time; a missing webhook is a 404', async () => {
  const syncId = await world.newSync();
  const webhook = await world.createWebhook(syncId, { url: 'http://127.0.0.1:9/hook', topics: [topic(syncId)] });
  const path = route(syncId, webhook.id, '/recover');
  const future = new Date(Date.now() + 60_000).toISOString();
  const old = new Date(Date.now() - RETENTION_MS - 60_000).toISOString();
  const cases: Array<[unknown, number, RegExp]> = [
    [{ since: future }, 422, new RegExp(`since: ${future.replace(/[.]/g, '\\.')} is in the future`)],
    [{ since: old }, 422, /is older than the event log keeps events \(1 hour\); the earliest is \d{4}-/],
    [{ since: 'yesterday' }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: '2024-05-01T12:00:00' }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: 1714564800 }, 400, /since: must be an ISO 8601 time with a zone/],
    [{}, 400, /since: must be an ISO 8601 time/],
    [{ since: new Date().toISOString(), from: 1 }, 400, /Unrecognized key\(s\) in object: 'from'/],
    // The odd forms: zones no clock has, a leap second, years out of range, a number, nothing.
    [{ since: '2026-12-01T22:00:00+24:00' }, 400, /since: must be a real time: a zone is at most 23:59 from UTC/],
    [{ since: '2026-12-01T22:00:00+99:99' }, 400, /since: must be a real time/],
    [{ since: '2026-12-01T22:00:00+2400' }, 400, /since: must be a real time/],
    [{ since: '2016-12-31T23:59:60Z' }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: '2026-02-30T00:00:00Z' }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: '0000-01-01T00:00:00Z' }, 422, /since: 0000-01-01T00:00:00\.000Z is older than the event log keeps events/],
    [{ since: '10000-01-01T00:00:00Z' }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: '' }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: null }, 400, /since: must be an ISO 8601 time with a zone/],
    [{ since: 0 }, 400, /since: must be an ISO 8601 time with a zone/],
  ];
  for (const [body, status, message] of cases) {
    const answer = await call('POST', path, body);
    assert.is(answer.status, status, `${JSON.stringify(body)}: ${answer.text}`);
    assert.match(answer.body.error.message, message);
  }
  const noBody = await call('POST', path);
  assert.is(noBody.status, 400);
  const { rows } = await world.pool.query<{ cursor_generation: string }>('SELECT cursor_generation FROM webhook_destinations WHERE id = $1', [webhook.id]);
  assert.is(rows[0]!.cursor_generation, '0', 'nothing moved');
  const missing = await call('POST', route(syncId, 'wh_nope', '/recover'), { since: new Date().toISOString() });
  assert.is(missing.status, 404);
});

test.run();
