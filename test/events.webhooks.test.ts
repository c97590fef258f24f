import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authenticator } from '../src/api/auth.ts';
import { createApiApp } from '../src/api/server.ts';
import { AccountStore } from '../src/control/accounts.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { FailedCredentials } from '../src/credentials/throttle.ts';
import { ServerPool } from '../src/control/servers.ts';
import { SyncService } from '../src/control/sync-service.ts';
import { SyncStore } from '../src/control/syncs.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { EventAppender } from '../src/events/append.ts';
import { EventBus } from '../src/events/bus.ts';
import { EventLogReader } from '../src/events/log.ts';
import { nonPublicKind, systemLookup, type LookupAll } from '../src/http/address.ts';
import { DeliveryLog } from '../src/events/webhooks/deliveries.ts';
import { startWebhookDeliverer, type WebhookDeliverer, type WebhookDelivererOptions } from '../src/events/webhooks/deliverer.ts';
import { WebhookStore } from '../src/events/webhooks/destinations.ts';
import { laneOf, LANE_SQL } from '../src/events/webhooks/lanes.ts';
import { isExhausted, retryDelay, retrySchedule } from '../src/events/webhooks/schedule.ts';
import { listen, type RunningServer } from '../src/http/listen.ts';
import { createLogger } from '../src/log.ts';
import { newDatabaseName, newSyncId } from '../src/ids.ts';
import { freshDatabase } from './harness/postgres.ts';
import { request } from './harness/service.ts';
import { builtInKinds } from '../src/kinds/built-in.ts';

// ── the world: one control database, an API app on it, a bus, real receivers ──

class LogCollector extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

const logs = new LogCollector();
const logger = createLogger({ level: 'debug', destination: logs });
const adminToken = `tra_${randomBytes(12).toString('hex')}`;
let url: string;
let pool: pg.Pool;
let box: SecretBox;
let bus: EventBus;
let reader: EventLogReader;
let accounts: AccountStore;
let syncs: SyncStore;
let store: WebhookStore;
let deliveries: DeliveryLog;
let api: RunningServer;
let apiUrl: string;
let privateApi: RunningServer;
let privateApiUrl: string;
let alice: { id: string; token: string };
let bob: { id: string; token: string };
const deliverers: WebhookDeliverer[] = [];
const receivers: Receiver[] = [];

/** Names the tests resolve without DNS: one public, one that rebinds to loopback, one mixed. */
const testLookup: LookupAll = async (host) => {
  const table: Record<string, string[]> = {
    'public.test': ['93.184.216.34'],
    'loopback.test': ['127.0.0.1'],
    'mixed.test': ['93.184.216.34', '10.0.0.7'],
    'mapped.test': ['::ffff:192.168.1.1'],
  };
  const addresses = table[host];
  if (!addresses && host === 'localhost') return systemLookup(host);
  if (!addresses) throw Object.assign(new Error(`no such host ${host}`), { code: 'ENOTFOUND' });
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

test.before(async () => {
  url = await freshDatabase('webhooks');
  await migrateControlDatabase(url, logger);
  pool = new pg.Pool({ connectionString: url, max: 20 });
  box = new SecretBox(randomBytes(32));
  bus = new EventBus({ url, logger });
  await bus.start();
  reader = new EventLogReader(pool);
  accounts = new AccountStore(pool, box);
  syncs = new SyncStore(pool, box);
  store = new WebhookStore(pool, box);
  deliveries = new DeliveryLog(pool);
  const kinds = builtInKinds();
  const servers = new ServerPool({ pool, box, configuredUrl: url, logger });
  await servers.ensureConfigured('us-west-2');
  const syncService = new SyncService({ store: syncs, servers, defaultRegion: 'us-west-2', logger, kinds });
  const apiOptions = {
    pool,
    accounts,
    syncs,
    syncService,
    servers,
    kinds,
    authenticate: authenticator(accounts, adminToken, new FailedCredentials({ logger })),
    events: { restUrl: 'http://127.0.0.1:1', kafkaBrokers: [] },
    logger,
    box,
    webhookLookup: testLookup,
  };
  api = await listen(createApiApp({ ...apiOptions, webhookAllowPrivate: false }).callback(), { host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${api.port}`;
  privateApi = await listen(createApiApp({ ...apiOptions, webhookAllowPrivate: true }).callback(), { host: '127.0.0.1', port: 0 });
  privateApiUrl = `http://127.0.0.1:${privateApi.port}`;
  for (const name of ['alice', 'bob'] as const) {
    const created = await accounts.create(name);
    const account = { id: created.account.id, token: created.apiToken.reveal() };
    if (name === 'alice') alice = account;
    else bob = account;
  }
});

test.after(async () => {
  if (process.env.WEBHOOK_TEST_LOGS)
    process.stderr.write(
      logs.lines
        .filter((l) => /"level":(40|50)/.test(l))
        .map((l) => l.slice(0, 400))
        .slice(0, 30)
        .join('\n'),
    );
  for (const deliverer of deliverers) await deliverer.stop();
  for (const receiver of receivers) await receiver.stop();
  await api.close();
  await privateApi.close();
  await bus.stop();
  await pool.end();
});

async function newSync(accountId: string): Promise<string> {
  const databaseName = newDatabaseName();
  const sync = await syncs.insert({
    id: newSyncId(),
    accountId,
    kind: 'stripe',
    baseId: null,
    upstreamAccountId: null,
    describeUpstream: () => 'this Stripe key',
    apiKey: 'sk_test_notused',
    settings: { turbo: false } as never,
    databaseName,
    databaseRole: `${databaseName}_ro`,
    databasePassword: 'unused',
    customServerUrl: null,
    region: 'us-west-2',
    upstreamName: null,
  });
  await syncs.setState(sync.id, 'active');
  return sync.id;
}

/** The decoder's side: events for (record, n) pairs, logged in order, one transaction per call. */
class Log {
  private lsn = 0x1000;
  private n = 0;
  readonly appender: EventAppender;
  readonly values = new Map<string, { recordId: string; n: number; value: string }>();
  constructor(
    readonly syncId: string,
    accountId: string,
  ) {
    this.appender = new EventAppender({ pool, syncId, accountId });
  }
  async append(records: string[], collection = 'customer'): Promise<string[]> {
    const events = records.map((recordId) => {
      this.n += 1;
      const eventKey = `${this.syncId}:${this.lsn.toString(16)}:${this.n}`;
      const value = JSON.stringify({
        collection,
        created_at: new Date().toISOString(),
        data: { id: recordId, n: this.n, note: 'ünïcødé ✓' },
        event: 'updated',
        id: recordId,
        table_db_name: collection,
        changes: { n: this.n - 1 },
      });
      this.values.set(eventKey, { recordId, n: this.n, value });
      return { collection, recordId, eventKey, createdAt: new Date(), value };
    });
    this.lsn += 0x100;
    await this.appender.append(events, `0/${this.lsn.toString(16).toUpperCase()}`);
    return events.map((e) => e.eventKey);
  }
}

interface Received {
  id: string;
  timestamp: string;
  signature: string;
  eventId: string;
  contentType: string;
  body: string;
  status: number;
}

type Answer = number | 'hang' | { status: number; body?: string; headers?: Record<string, string> };
/** What the receiver answers; a promise holds the answer back until it settles. */
type Behaviour = (req: http.IncomingMessage, body: string) => Answer | Promise<Answer>;

/** A real HTTP receiver on loopback that can answer, fail, hang or be switched off. */
class Receiver {
  readonly requests: Received[] = [];
  behaviour: Behaviour = () => 204;
  private server: http.Server | undefined;
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook?tenant=t1`;
  }

  /** Only what it answered 2xx: what the receiver has really taken. */
  get accepted(): Received[] {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300);
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const answer = await this.behaviour(req, body);
        if (answer === 'hang') return;
        const { status, body: text, headers } = typeof answer === 'number' ? { status: answer, body: undefined, headers: undefined } : answer;
        this.requests.push({
          id: String(req.headers['webhook-id']),
          timestamp: String(req.headers['webhook-timestamp']),
          signature: String(req.headers['webhook-signature']),
          eventId: String(req.headers['svc-event-id']),
          contentType: String(req.headers['content-type']),
          body,
          status,
        });
        res.writeHead(status, headers);
        res.end(text);
      });
    });
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    if (!receivers.includes(this)) receivers.push(this);
    return this;
  }

  /** Down: connections are refused until start() again (same port). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const fast = { initialDelayMs: 20, factor: 2, maxDelayMs: 200, maxAttempts: 10_000, maxAgeMs: 600_000, timeoutMs: 2_000 };
const tuning = { lanes: 4, flushMs: 20, idleMs: 300, refreshMs: 300, reloadGapMs: 20 };

function deliver(syncId: string, options: Partial<WebhookDelivererOptions> = {}): WebhookDeliverer {
  const deliverer = startWebhookDeliverer({ pool, box, syncId, reader, bus, logger, allowPrivate: true, schedule: fast, tuning, ...options });
  deliverers.push(deliverer);
  return deliverer;
}

async function createWebhook(syncId: string, receiverUrl: string, collections = ['customer']) {
  const created = await request(privateApiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: alice.token,
    body: { url: receiverUrl, topics: collections.map((c) => `svc.${syncId}.${c}`) },
  });
  assert.is(created.status, 201, created.text);
  return created.body as { id: string; url: string; topics: string[]; secret: string };
}

/** Standard Webhooks verification, written from the spec and not from the code under test. */
function verify(secret: string, received: Received, toleranceSeconds = 300): boolean {
  assert.ok(secret.startsWith('whsec_'));
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const timestamp = Number(received.timestamp);
  if (!Number.isInteger(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = createHmac('sha256', key).update(`${received.id}.${received.timestamp}.${received.body}`).digest();
  return received.signature.split(' ').some((part) => {
    const [version, signature] = part.split(',');
    if (version !== 'v1' || !signature) return false;
    const given = Buffer.from(signature, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** Per record, the events the receiver took, as the n each carries. */
function perRecord(received: Received[]): Map<string, number[]> {
  const map = new Map<string, number[]>();
  for (const r of received) {
    const event = JSON.parse(r.body) as { id: string; data: { n: number } };
    map.set(event.id, [...(map.get(event.id) ?? []), event.data.n]);
  }
  return map;
}

// ── units ─────────────────────────────────────────────────────────────────

test('addresses: loopback, private, link-local and embedded IPv4 are not public', () => {
  const notPublic = [
    '127.0.0.1',
    '127.8.9.10',
    '10.0.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:a9fe:a9fe',
    '::127.0.0.1',
    '64:ff9b::a00:1',
    '2002:7f00:1::1',
    '2002:c0a8:101::',
    'fe80::1%eth0',
    'not-an-ip',
  ];
  for (const address of notPublic) assert.ok(nonPublicKind(address), `${address} should not be public`);
  const isPublic = ['93.184.216.34', '8.8.8.8', '172.32.0.1', '192.169.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'];
  for (const address of isPublic) assert.is(nonPublicKind(address), undefined, `${address} should be public`);
  assert.is(nonPublicKind('::ffff:127.0.0.1'), 'loopback');
  assert.is(nonPublicKind('169.254.1.1'), 'link-local');
});

test('retry schedule: exponential with full jitter, capped; exhausted by attempts or by a long failing run', () => {
  const schedule = retrySchedule();
  assert.equal([schedule.initialDelayMs, schedule.factor, schedule.maxDelayMs, schedule.maxAgeMs], [1_000, 2, 3_600_000, 86_400_000]);
  assert.is(
    retryDelay(schedule, 1, () => 0.999999),
    999,
  );
  assert.is(
    retryDelay(schedule, 4, () => 0.5),
    4_000,
  );
  assert.is(
    retryDelay(schedule, 30, () => 0.5),
    1_800_000,
  );
  assert.is(
    retryDelay(schedule, 3, () => 0),
    0,
  );
  const now = Date.now();
  assert.not.ok(isExhausted(schedule, 3, now - 1000, now));
  assert.ok(isExhausted(schedule, schedule.maxAttempts, now, now));
  assert.ok(isExhausted(schedule, 1, now - schedule.maxAgeMs, now));
  assert.throws(() => retrySchedule({ maxAttempts: 0 }));
});

test('lanes: the SQL hash agrees with the one in code', async () => {
  const ids = ['cus_1', 'rec0123456789abcd', 'ünï', 'x'.repeat(200), '', 'sub_ABC'];
  for (const lanes of [1, 4, 32, 7]) {
    const { rows } = await pool.query<{ id: string; lane: number }>(`SELECT id, ${LANE_SQL('id', '$2')} AS lane FROM unnest($1::text[]) AS u(id)`, [
      ids,
      lanes,
    ]);
    for (const row of rows) assert.is(row.lane, laneOf(row.id, lanes), `${row.id} over ${lanes} lanes`);
  }
});

// ── delivery ──────────────────────────────────────────────────────────────

test('events arrive signed per Standard Webhooks, with the exact event JSON and its id', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  await log.append(['before_the_webhook']); // logged before the destination existed: not delivered
  const receiver = await new Receiver().start();
  deliver(syncId); // started before the destination exists: it picks it up
  const webhook = await createWebhook(syncId, receiver.url);
  assert.match(webhook.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const keys = [...(await log.append(['cus_1', 'cus_2'])), ...(await log.append(['cus_1'], 'invoice')), ...(await log.append(['cus_3']))];
  await until('three deliveries', () => receiver.accepted.length >= 3);
  await new Promise((r) => setTimeout(r, 200));
  assert.is(receiver.requests.length, 3, 'the invoice topic is not subscribed; the event from before is not sent');
  for (const r of receiver.requests) {
    assert.ok(verify(webhook.secret, r), `signature of ${r.id} verifies`);
    assert.not.ok(verify(`whsec_${randomBytes(32).toString('base64')}`, r), 'another secret does not verify');
    assert.is(r.eventId, r.id);
    assert.is(r.contentType, 'application/json');
    assert.is(r.body, log.values.get(r.id)!.value, 'the body is the logged value, byte for byte');
  }
  assert.equal(receiver.requests.map((r) => r.id).sort(), [keys[0], keys[1], keys[3]].sort());
  // Nothing of the first-try deliveries is written per event; the cursor moved past them.
  await until('cursor saved', async () => (await store.get(syncId, webhook.id))!.cursorSeq === (await reader.lastSeq(syncId)));
  assert.equal((await deliveries.list(webhook.id, { limit: 10 })).data, []);
  const shown = await request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${webhook.id}`, { token: alice.token });
  assert.is(shown.status, 200);
  assert.is(shown.body.deliveries.delivered, 3);
  assert.not.ok('secret' in shown.body);
  // The secret is sealed at rest and never logged.
  const { rows } = await pool.query<{ secret_enc: string }>('SELECT secret_enc FROM webhook_destinations WHERE id = $1', [webhook.id]);
  assert.not.ok(rows[0]!.secret_enc.includes(webhook.secret.slice(6, 20)));
  assert.not.ok(logs.text.includes(webhook.secret.slice(6)));
});

test('a receiver that refuses, then answers 500, gets every event once it is back, in order per record', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  deliver(syncId);
  const records = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7'];
  await log.append(records);
  await until('first round', () => receiver.accepted.length === records.length);

  await receiver.stop(); // refused
  for (let round = 0; round < 6; round++) await log.append(round % 2 ? records : [...records].reverse());
  await new Promise((r) => setTimeout(r, 400));
  await receiver.start();
  receiver.behaviour = () => 500; // up, but failing
  await until('failing attempts', () => receiver.requests.filter((r) => r.status === 500).length >= 8);
  await log.append(records);
  const failing = await request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${webhook.id}/deliveries?status=retrying`, {
    token: alice.token,
  });
  assert.is(failing.status, 200);
  assert.ok(failing.body.data.length > 0, 'retrying deliveries are visible');
  assert.ok(failing.body.data.every((d: { status: string }) => d.status === 'retrying'));
  assert.ok(failing.body.data.some((d: { last_status_code: number | null }) => d.last_status_code === 500));

  receiver.behaviour = () => 200;
  const total = records.length * 8;
  await until('everything delivered', () => receiver.accepted.length === total, 20_000);
  await new Promise((r) => setTimeout(r, 300));
  assert.is(receiver.accepted.length, total, 'each event taken exactly once (no crash, no duplicates)');
  const expected = (recordId: string) => [...log.values.values()].filter((v) => v.recordId === recordId).map((v) => v.n);
  for (const [recordId, ns] of perRecord(receiver.accepted)) assert.equal(ns, expected(recordId), `order of ${recordId}`);
  assert.equal(new Set(receiver.accepted.map((r) => r.id)).size, total);
  await until('queue drained', async () => {
    const counts = await deliveries.counts(webhook.id);
    return counts.pending === 0 && counts.retrying === 0;
  });
  assert.is((await deliveries.counts(webhook.id)).exhausted, 0);
  // Back to first-try delivery: new events leave no rows.
  const before = (await deliveries.list(webhook.id, { limit: 1000 })).data.length;
  await log.append(['r1', 'r2']);
  await until('new ones', () => receiver.accepted.length === total + 2);
  assert.is((await deliveries.list(webhook.id, { limit: 1000 })).data.length, before);
});

test('a failing destination costs a row per lane, not per event, and loses nothing across a restart', async () => {
  // Found by a hostile tenant: ten webhooks to a refusing address, each recovered an hour back,
  // wrote every queued event into webhook_deliveries (190k rows, ~1 GB) through the shared pool.
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  receiver.behaviour = () => 503;
  const webhook = await createWebhook(syncId, receiver.url);
  let deliverer = deliver(syncId);
  const records = Array.from({ length: 40 }, (_, i) => `rec${i}`);
  for (let round = 0; round < 25; round++) await log.append(round % 2 ? records : [...records].reverse());
  const total = records.length * 25;
  const counted = async (table: string) =>
    (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE destination_id = $1`, [webhook.id])).rows[0]!.n;
  // Every lane's head fails: the cursor still reaches the log's end, the events wait in the log.
  await until('cursor past every event', async () => (await store.get(syncId, webhook.id))!.cursorSeq === (await reader.lastSeq(syncId)));
  await until('every lane failing', () => new Set(receiver.requests.map((r) => laneOf(JSON.parse(r.body).id, tuning.lanes))).size === tuning.lanes);
  assert.ok((await counted('webhook_deliveries')) <= tuning.lanes, `${await counted('webhook_deliveries')} rows for ${total} events`);
  assert.ok((await counted('webhook_lanes')) <= tuning.lanes);

  // Back, and restarted midway: each event arrives, and never before an earlier one of its record.
  receiver.behaviour = () => 200;
  await until('some delivered', () => receiver.accepted.length >= total / 4);
  await deliverer.stop();
  deliverer = deliver(syncId);
  await until('every event delivered', () => new Set(receiver.accepted.map((r) => r.id)).size === total, 30_000);
  const seen = new Map<string, number>();
  for (const r of receiver.accepted) {
    const event = JSON.parse(r.body) as { id: string; data: { n: number } };
    const expected = [...log.values.values()].filter((v) => v.recordId === event.id).map((v) => v.n);
    const index = expected.indexOf(event.data.n);
    assert.ok(index <= (seen.get(event.id) ?? -1) + 1, `${event.id}: ${event.data.n} came before the events ahead of it`);
    seen.set(event.id, Math.max(seen.get(event.id) ?? -1, index));
  }
  assert.ok((await counted('webhook_deliveries')) <= tuning.lanes, 'only the failed heads left rows (delivered now)');
  await until('lanes caught up', async () => (await counted('webhook_lanes')) === 0);
  // And the lanes work from memory again: new events leave no rows.
  const rowsBefore = await counted('webhook_deliveries');
  const keys = await log.append(records);
  await until('new ones', () => keys.every((key) => receiver.accepted.some((r) => r.id === key)));
  assert.is(await counted('webhook_deliveries'), rowsBefore);
});

test('a destination answering again cuts short the back-off of its waiting deliveries', async () => {
  // Found by the traffic simulation: after receiver outages of minutes, deliveries waited
  // out back-offs of tens of minutes although the receiver had long been taking new events.
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  await createWebhook(syncId, receiver.url);
  // Every back-off is a full minute: only the recovery can bring the waiting one sooner.
  deliver(syncId, { schedule: { ...fast, initialDelayMs: 60_000, maxDelayMs: 60_000 }, random: () => 0.999 });
  receiver.behaviour = () => 503;
  const waiting = 'w1';
  const other = ['x1', 'x2', 'x3', 'x4', 'x5', 'x6'].find((id) => laneOf(id, tuning.lanes) !== laneOf(waiting, tuning.lanes))!;
  const [waitingKey] = await log.append([waiting]);
  await until('the first attempt failed', () => receiver.requests.length === 1);
  receiver.behaviour = () => 200;
  const started = Date.now();
  const [otherKey] = await log.append([other]);
  await until('the new event delivered', () => receiver.accepted.some((r) => r.id === otherKey));
  await until('the waiting delivery delivered', () => receiver.accepted.some((r) => r.id === waitingKey), 10_000);
  assert.ok(Date.now() - started < 10_000, `delivered ${Date.now() - started} ms after the destination answered again`);
  assert.is(receiver.accepted.length, 2);
});

test('a 2xx that comes while another delivery is failing still cuts short that one’s back-off', async () => {
  // Seen once in CI: the other event was delivered while the waiting one's 503 was still on its
  // way back, so no lane was failing yet and the 2xx woke nobody; the delivery then waited out
  // its full minute. The receiver here holds the 503 until the other event has been taken.
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  await createWebhook(syncId, receiver.url);
  deliver(syncId, { schedule: { ...fast, initialDelayMs: 60_000, maxDelayMs: 60_000 }, random: () => 0.999 });
  const waiting = 'w1';
  const other = ['x1', 'x2', 'x3', 'x4', 'x5', 'x6'].find((id) => laneOf(id, tuning.lanes) !== laneOf(waiting, tuning.lanes))!;
  let otherTaken!: () => void;
  const taken = new Promise<void>((resolve) => (otherTaken = resolve));
  let firstSeen!: () => void;
  const seen = new Promise<void>((resolve) => (firstSeen = resolve));
  let calls = 0;
  // By the record in the body: the delivery may come before append() has answered with its key.
  receiver.behaviour = async (_req, body) => {
    if ((JSON.parse(body) as { id: string }).id !== waiting) {
      otherTaken();
      return 200;
    }
    if (++calls > 1) return 200;
    firstSeen();
    await taken;
    return 503;
  };
  const [waitingKey] = await log.append([waiting]);
  await seen;
  const started = Date.now();
  const [otherKey] = await log.append([other]);
  await until('the new event delivered', () => receiver.accepted.some((r) => r.id === otherKey));
  await until('the waiting delivery delivered', () => receiver.accepted.some((r) => r.id === waitingKey), 10_000);
  assert.ok(Date.now() - started < 10_000, `delivered ${Date.now() - started} ms after the destination answered again`);
  assert.equal(
    receiver.requests.map((r) => [r.id, r.status]),
    [
      [otherKey, 200],
      [waitingKey, 503],
      [waitingKey, 200],
    ],
  );
});

test('a replay request also retries now the deliveries waiting out a back-off', async () => {
  // Found by the 45-minute soak: a receiver back up just as traffic stopped left one delivery
  // 56 minutes from its next try, with no other delivery to show the receiver was back.
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  deliver(syncId, { schedule: { ...fast, initialDelayMs: 600_000, maxDelayMs: 600_000 }, random: () => 0.999 });
  receiver.behaviour = () => 503;
  const [key] = await log.append(['waiting']);
  await until('the first attempt failed', () => receiver.requests.length === 1);
  await until('queued as retrying', async () => (await deliveries.counts(webhook.id)).retrying === 1);
  receiver.behaviour = () => 200;
  const started = Date.now();
  const asked = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks/${webhook.id}/deliveries/replay`, { token: alice.token });
  assert.is(asked.status, 202, asked.text);
  assert.is(asked.body.replayed, 0);
  assert.is(asked.body.retried_now.length, 1);
  await until('delivered', () => receiver.accepted.some((r) => r.id === key), 10_000);
  assert.ok(Date.now() - started < 10_000);
  // The receiver answers before the deliverer records the outcome: wait for the record.
  await until('recorded as delivered', async () => (await deliveries.list(webhook.id, { limit: 10 })).data[0]?.status === 'delivered');
  const [row] = (await deliveries.list(webhook.id, { limit: 10 })).data;
  assert.is(row!.attempts, 2, 'its attempts are kept');
});

test('one failing record does not hold up records in other lanes', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  await createWebhook(syncId, receiver.url);
  deliver(syncId);
  receiver.behaviour = (_req, body) => ((JSON.parse(body) as { id: string }).id === 'poison' ? 503 : 200);
  const poisonLane = laneOf('poison', tuning.lanes);
  const others = Array.from({ length: 40 }, (_, i) => `ok${i}`).filter((id) => laneOf(id, tuning.lanes) !== poisonLane);
  await log.append(['poison', ...others]);
  await log.append(others);
  await until('other lanes delivered', () => receiver.accepted.length === others.length * 2);
  // The poison record never succeeds; its retries come on its own schedule, which may end
  // after the other lanes are through.
  await until('the poison record retried', () => receiver.requests.filter((r) => r.status === 503).length >= 2);
});

test('exhausted deliveries are listed and replayed (through the API); the lane moves on meanwhile', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  deliver(syncId, { schedule: { ...fast, maxAttempts: 3 } });
  receiver.behaviour = () => ({ status: 500, body: 'database is down' });
  const keys = await log.append(['a', 'b', 'a']);
  const listExhausted = () => request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${webhook.id}/deliveries?status=exhausted`, { token: alice.token });
  await until('three exhausted', async () => (await listExhausted()).body.data.length === 3);
  const exhausted = (await listExhausted()).body;
  assert.equal(exhausted.data.map((d: { event_id: string }) => d.event_id).sort(), [...keys].sort());
  for (const d of exhausted.data) {
    assert.is(d.status, 'exhausted');
    assert.is(d.attempts, 3);
    assert.is(d.last_status_code, 500);
    assert.match(d.last_error, /HTTP 500: database is down/);
    assert.ok(d.finished_at);
  }
  assert.is(exhausted.has_more, false);
  const shown = await request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${webhook.id}`, { token: alice.token });
  assert.is(shown.body.deliveries.exhausted, 3);
  assert.is(shown.body.deliveries.failed_attempts, 9);

  // The receiver recovers; newer events flow at once, the exhausted ones wait for a replay.
  receiver.behaviour = () => 200;
  const newer = await log.append(['c']);
  await until('newer delivered', () => receiver.accepted.some((r) => r.id === newer[0]));
  assert.is(receiver.accepted.length, 1);

  // Replay one by id, then the rest.
  const first = exhausted.data.find((d: { event_id: string }) => d.event_id === keys[0]).id as string;
  const one = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks/${webhook.id}/deliveries/replay`, {
    token: alice.token,
    body: { ids: [first] },
  });
  assert.is(one.status, 202, one.text);
  assert.equal(one.body, { replayed: 1, ids: [first] });
  await until('replayed one', () => receiver.accepted.some((r) => r.id === keys[0]));
  const rest = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks/${webhook.id}/deliveries/replay`, { token: alice.token });
  assert.is(rest.status, 202, rest.text);
  assert.is(rest.body.replayed, 2);
  await until('replayed all', () => keys.every((k) => receiver.accepted.some((r) => r.id === k)));
  // The record's events in log order among the replays; replayed ones are signed like any other.
  assert.equal(
    receiver.accepted
      .filter((r) => keys.includes(r.id))
      .map((r) => r.id)
      .filter((id) => id !== keys[1]),
    [keys[0], keys[2]],
  );
  for (const r of receiver.accepted) assert.ok(verify(webhook.secret, r));
  await until('log says delivered', async () => {
    const all = (await deliveries.list(webhook.id, { limit: 100 })).data;
    return all.length === 3 && all.every((d) => d.status === 'delivered' && d.replays === 1);
  });
  const again = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks/${webhook.id}/deliveries/replay`, {
    token: alice.token,
    body: { ids: [first] },
  });
  assert.is(again.status, 409);
  assert.match(again.body.error.message, /only exhausted deliveries can be replayed: \d+ is delivered/);
});

test('a long outage drains into the exhausted list at one attempt per event, then nothing is lost on replay', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  await receiver.stop();
  deliver(syncId, { schedule: { ...fast, maxAgeMs: 300 } });
  const keys: string[] = [];
  for (let i = 0; i < 5; i++) keys.push(...(await log.append(['x', 'y', 'z'])));
  await until('all exhausted', async () => (await deliveries.counts(webhook.id)).exhausted === keys.length);
  await receiver.start();
  await deliveries.replay(webhook.id, undefined);
  await store.list(syncId); // (nothing cached anywhere: the deliverer notices through the bus)
  await pool.query('SELECT pg_notify($1, $2)', ['tributary_events', syncId]);
  await until('all replayed', () => receiver.accepted.length === keys.length);
  for (const [recordId, ns] of perRecord(receiver.accepted)) {
    assert.equal(
      ns,
      [...ns].sort((a, b) => a - b),
      `replayed in log order for ${recordId}`,
    );
  }
});

test('stopping and restarting the deliverer delivers every event, duplicates keeping their webhook-id', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  receiver.behaviour = () => 200;
  let deliverer = deliver(syncId);
  const keys: string[] = [];
  for (let i = 0; i < 10; i++) keys.push(...(await log.append(['p', 'q', 'r', 's', 't'])));
  await until('some delivered', () => receiver.accepted.length >= 10);
  await deliverer.stop();
  // A failing stretch too, so that some events are parked in the queue at the stop.
  receiver.behaviour = () => 500;
  deliverer = deliver(syncId);
  for (let i = 0; i < 4; i++) keys.push(...(await log.append(['p', 'q', 'r', 's', 't'])));
  await until('queued', async () => (await deliveries.counts(webhook.id)).retrying > 0);
  await deliverer.stop();
  receiver.behaviour = () => 200;
  deliver(syncId, { tuning: { ...tuning, lanes: 3 } }); // a different lane count: queued rows move lanes
  await until('all delivered', () => keys.every((k) => receiver.accepted.some((r) => r.id === k)), 20_000);
  for (const r of receiver.accepted) assert.is(r.body, log.values.get(r.id)!.value, 'a duplicate carries the same id and body');
  const firstSeen = receiver.accepted.filter((r, i, all) => all.findIndex((x) => x.id === r.id) === i);
  for (const [recordId, ns] of perRecord(firstSeen)) {
    assert.equal(
      ns,
      [...ns].sort((a, b) => a - b),
      `first receipts in log order for ${recordId}`,
    );
  }
});

test('deleting a webhook stops its deliveries', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  deliver(syncId);
  await log.append(['d1']);
  await until('delivered', () => receiver.accepted.length === 1);
  const deleted = await request(apiUrl, 'DELETE', `/api/syncs/${syncId}/webhooks/${webhook.id}`, { token: alice.token });
  assert.is(deleted.status, 200);
  assert.equal(deleted.body, { id: webhook.id, deleted: true });
  await new Promise((r) => setTimeout(r, 300));
  await log.append(['d1', 'd2']);
  await new Promise((r) => setTimeout(r, 500));
  assert.is(receiver.requests.length, 1);
  const gone = await request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${webhook.id}`, { token: alice.token });
  assert.is(gone.status, 404);
});

test('timeouts, redirects and huge answers are failures; the response body is read only so far', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  const webhook = await createWebhook(syncId, receiver.url);
  const huge = 'x'.repeat(5_000_000);
  receiver.behaviour = (_req, body) => {
    const n = (JSON.parse(body) as { data: { n: number } }).data.n;
    if (n === 1) return 'hang';
    if (n === 2) return { status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' } };
    return { status: 500, body: huge };
  };
  deliver(syncId, { schedule: { ...fast, maxAttempts: 1, timeoutMs: 300 } });
  const [hang, redirect, big] = await log.append(['h', 'm', 'b']);
  await until('three exhausted', async () => (await deliveries.counts(webhook.id)).exhausted === 3);
  const rows = new Map((await deliveries.list(webhook.id, { limit: 10 })).data.map((d) => [d.eventKey, d]));
  assert.match(rows.get(hang!)!.lastError!, /timed out after 300 ms/);
  assert.is(rows.get(redirect!)!.lastStatusCode, 302);
  assert.match(rows.get(redirect!)!.lastError!, /redirects are not followed/);
  assert.is(rows.get(big!)!.lastStatusCode, 500);
  assert.ok(rows.get(big!)!.lastError!.length < 300);
});

test('without allowPrivate, deliveries to loopback are refused at connect time too (DNS rebinding)', async () => {
  const syncId = await newSync(alice.id);
  const log = new Log(syncId, alice.id);
  const receiver = await new Receiver().start();
  // Created while the name still looked public; now it answers 127.0.0.1.
  const literal = await store.create({ syncId, accountId: alice.id, url: receiver.url, topics: [`svc.${syncId}.customer`], max: 25 });
  const named = await store.create({
    syncId,
    accountId: alice.id,
    url: `http://loopback.test:${receiver.port}/hook`,
    topics: [`svc.${syncId}.customer`],
    max: 25,
  });
  deliver(syncId, { allowPrivate: false, lookup: testLookup, schedule: { ...fast, maxAttempts: 2 } });
  await log.append(['e1']);
  await until('both exhausted', async () => {
    const a = await deliveries.counts(literal!.destination.id);
    const b = await deliveries.counts(named!.destination.id);
    return a.exhausted === 1 && b.exhausted === 1;
  });
  assert.is(receiver.requests.length, 0, 'nothing reached the loopback receiver');
  const [a] = (await deliveries.list(literal!.destination.id, { limit: 1 })).data;
  const [b] = (await deliveries.list(named!.destination.id, { limit: 1 })).data;
  assert.match(a!.lastError!, /127\.0\.0\.1 is a loopback address; refused/);
  assert.match(b!.lastError!, /loopback\.test resolves to 127\.0\.0\.1, a loopback address; refused/);
});

// ── the API ───────────────────────────────────────────────────────────────

test('loopback, private and link-local destinations are refused with 422 unless allowed', async () => {
  const syncId = await newSync(alice.id);
  const topics = [`svc.${syncId}.customer`];
  const refused = [
    ['http://127.0.0.1:9/hook', /127\.0\.0\.1 is a loopback address/],
    ['http://localhost:9/hook', /localhost resolves to .*, which is a loopback address/],
    ['http://[::1]/hook', /::1 is a loopback address/],
    ['http://[::ffff:127.0.0.1]/hook', /::ffff:7f00:1 is a loopback address/],
    ['http://10.1.2.3/hook', /private address/],
    ['https://169.254.169.254/latest/meta-data', /link-local address/],
    ['http://0x7f.1/hook', /127\.0\.0\.1 is a loopback/],
    ['http://loopback.test/hook', /loopback\.test resolves to 127\.0\.0\.1/],
    ['http://mixed.test/hook', /mixed\.test resolves to 10\.0\.0\.7, which is a private address/],
    ['http://mapped.test/hook', /resolves to ::ffff:192\.168\.1\.1, which is a private address/],
    ['http://nowhere.test/hook', /could not be resolved/],
  ] as const;
  for (const [destination, message] of refused) {
    const answer = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, { token: alice.token, body: { url: destination, topics } });
    assert.is(answer.status, 422, `${destination}: ${answer.text}`);
    assert.is(answer.body.error.code, 'unprocessable');
    assert.match(answer.body.error.message, message);
    assert.match(answer.body.error.message, /TRIBUTARY_WEBHOOK_ALLOW_PRIVATE=1|could not be resolved/);
  }
  for (const destination of ['http://93.184.216.34/hook', 'https://public.test/hooks/tributary?key=abc']) {
    const answer = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, { token: alice.token, body: { url: destination, topics } });
    assert.is(answer.status, 201, answer.text);
    assert.equal(Object.keys(answer.body).sort(), [
      'created_at',
      'disabled_at',
      'disabled_reason',
      'filter',
      'id',
      'max_per_second',
      'previous_secret_expires_at',
      'secret',
      'state',
      'topics',
      'url',
    ]);
    assert.is(answer.body.state, 'enabled');
    assert.is(answer.body.url, destination);
  }
  const allowed = await request(privateApiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: alice.token,
    body: { url: 'http://127.0.0.1:9/hook', topics },
  });
  assert.is(allowed.status, 201, 'allowed by the operator option');
});

test('bad input to the webhook routes is a 4xx naming the problem', async () => {
  const syncId = await newSync(alice.id);
  const otherSync = await newSync(alice.id);
  const route = `/api/syncs/${syncId}/webhooks`;
  const topic = `svc.${syncId}.customer`;
  const cases: Array<[unknown, number, RegExp]> = [
    [{ topics: [topic] }, 400, /url: Required/],
    [{ url: 'ftp://example.com/x', topics: [topic] }, 400, /url: must be http:\/\/ or https:\/\/ \(got ftp\)/],
    [{ url: 'not a url', topics: [topic] }, 400, /url: must be an absolute http/],
    [{ url: 'https://user:pw@93.184.216.34/x', topics: [topic] }, 400, /url: must not contain credentials/],
    [{ url: 'https://93.184.216.34/x', topics: [] }, 400, /topics: at least one topic/],
    [{ url: 'https://93.184.216.34/x' }, 400, /topics: Required/],
    [{ url: 'https://93.184.216.34/x', topics: [`svc.${otherSync}.customer`] }, 400, new RegExp(`topics.0: must be a topic of this sync: svc\\.${syncId}\\.`)],
    [{ url: 'https://93.184.216.34/x', topics: [`svc.${syncId}.`] }, 400, /topics.0: must name a collection/],
    [{ url: 'https://93.184.216.34/x', topics: Array.from({ length: 101 }, (_, i) => `${topic}${i}`) }, 400, /at most 100 topics/],
    [{ url: 'https://93.184.216.34/x', topics: [topic], secret: 'mine' }, 400, /Unrecognized key\(s\) in object: 'secret'/],
    [{ url: `https://93.184.216.34/${'x'.repeat(2100)}`, topics: [topic] }, 400, /url: String must contain at most 2048/],
  ];
  for (const [body, status, message] of cases) {
    const answer = await request(apiUrl, 'POST', route, { token: alice.token, body });
    assert.is(answer.status, status, `${JSON.stringify(body).slice(0, 80)}: ${answer.text}`);
    assert.match(answer.body.error.message, message);
  }
  const notJson = await request(apiUrl, 'POST', route, { token: alice.token, raw: '{"url":', headers: { 'content-type': 'application/json' } });
  assert.is(notJson.status, 400);
  assert.is(notJson.body.error.code, 'invalid_json');
  const noToken = await request(apiUrl, 'GET', route);
  assert.is(noToken.status, 401);
  const noSync = await request(apiUrl, 'GET', '/api/syncs/syn_doesnotexist000/webhooks', { token: alice.token });
  assert.is(noSync.status, 404);

  const webhook = (await request(apiUrl, 'POST', route, { token: alice.token, body: { url: 'https://93.184.216.34/x', topics: [topic] } })).body;
  const base = `${route}/${webhook.id}/deliveries`;
  const badStatus = await request(apiUrl, 'GET', `${base}?status=failed`, { token: alice.token });
  assert.is(badStatus.status, 400);
  assert.match(badStatus.body.error.message, /status: must be one of pending, retrying, delivered, exhausted/);
  const badLimit = await request(apiUrl, 'GET', `${base}?limit=0`, { token: alice.token });
  assert.is(badLimit.status, 400);
  assert.match(badLimit.body.error.message, /limit: must be a whole number from 1 to 1000/);
  const badIds = await request(apiUrl, 'POST', `${base}/replay`, { token: alice.token, body: { ids: ['abc'] } });
  assert.is(badIds.status, 400);
  assert.match(badIds.body.error.message, /ids.0: must be a delivery id/);
  const unknownIds = await request(apiUrl, 'POST', `${base}/replay`, { token: alice.token, body: { ids: ['12345'] } });
  assert.is(unknownIds.status, 404);
  assert.match(unknownIds.body.error.message, /deliveries 12345 of webhook wh_/);
  const nothing = await request(apiUrl, 'POST', `${base}/replay`, { token: alice.token });
  assert.is(nothing.status, 202);
  assert.equal(nothing.body, { replayed: 0, ids: [] });
  const unknownWebhook = await request(apiUrl, 'GET', `${route}/wh_nope`, { token: alice.token });
  assert.is(unknownWebhook.status, 404);
  assert.match(unknownWebhook.body.error.message, /webhook wh_nope not found/);
  const wrongMethod = await request(apiUrl, 'PUT', `${route}/${webhook.id}`, { token: alice.token, body: {} });
  assert.is(wrongMethod.status, 405);

  // A sane number per sync.
  for (let i = (await store.list(syncId)).length; i < 25; i++) {
    const ok = await request(apiUrl, 'POST', route, { token: alice.token, body: { url: `https://93.184.216.34/${i}`, topics: [topic] } });
    assert.is(ok.status, 201);
  }
  const tooMany = await request(apiUrl, 'POST', route, { token: alice.token, body: { url: 'https://93.184.216.34/26', topics: [topic] } });
  assert.is(tooMany.status, 409);
  assert.match(tooMany.body.error.message, /at most 25 webhooks/);
});

test('another account can neither see nor delete a webhook; the admin can', async () => {
  const syncId = await newSync(alice.id);
  const created = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: alice.token,
    body: { url: 'https://93.184.216.34/alice', topics: [`svc.${syncId}.customer`] },
  });
  assert.is(created.status, 201);
  const wid = created.body.id;
  for (const [method, route] of [
    ['GET', `/api/syncs/${syncId}/webhooks`],
    ['POST', `/api/syncs/${syncId}/webhooks`],
    ['GET', `/api/syncs/${syncId}/webhooks/${wid}`],
    ['DELETE', `/api/syncs/${syncId}/webhooks/${wid}`],
    ['GET', `/api/syncs/${syncId}/webhooks/${wid}/deliveries`],
    ['POST', `/api/syncs/${syncId}/webhooks/${wid}/deliveries/replay`],
  ] as const) {
    const answer = await request(apiUrl, method, route, {
      token: bob.token,
      ...(method === 'POST' ? { body: { url: 'https://93.184.216.34/bob', topics: [`svc.${syncId}.customer`] } } : {}),
    });
    assert.is(answer.status, 404, `${method} ${route}: ${answer.text}`);
    assert.match(answer.body.error.message, new RegExp(`sync ${syncId} not found`));
  }
  // Bob's own sync does not reach Alice's webhook either.
  const bobSync = await newSync(bob.id);
  const crossed = await request(apiUrl, 'GET', `/api/syncs/${bobSync}/webhooks/${wid}`, { token: bob.token });
  assert.is(crossed.status, 404);
  const listed = await request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks`, { token: alice.token });
  assert.equal(
    listed.body.data.map((w: { id: string }) => w.id),
    [wid],
  );
  assert.not.ok('secret' in listed.body.data[0]);
  const asAdmin = await request(apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${wid}`, { token: adminToken });
  assert.is(asAdmin.status, 200);
  const deleted = await request(apiUrl, 'DELETE', `/api/syncs/${syncId}/webhooks/${wid}`, { token: alice.token });
  assert.is(deleted.status, 200);
});

test.run();
