/**
 * A hostile tenant grew the control database, which every tenant's disk shares, without limit:
 * 1,000 `POST /consume/<new group>/<instance>` calls with 240 junk topic names each took it
 * from 16 to 77 MB, since every instance was stored with its topics, owned or not, and nothing
 * stale was ever removed. Each table a tenant can add rows to is bounded now: consumer groups
 * take only the account's own topics, groups and instances are capped per account and swept
 * when stale; webhooks are capped per account, exhausted deliveries per webhook; console
 * sessions per account; a sync's recent errors per sync. Another account's consumer keeps
 * working throughout.
 */
import { PUBLIC_SCHEMAS } from '../src/syncdb/schemas.ts';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EventAppender } from '../src/events/append.ts';
import { EventBus } from '../src/events/bus.ts';
import { EventLogReader, topicName } from '../src/events/log.ts';
import { startWebhookDeliverer, type WebhookDeliverer } from '../src/events/webhooks/deliverer.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { createLogger } from '../src/log.ts';
import { StatusReporter } from '../src/sync/status-reporter.ts';
import { waitFor } from './harness/process.ts';
import { fileLogger } from './harness/test-log.ts';
import {
  airtableSyncBody,
  createAccount,
  loudSetUp,
  request,
  startTestService,
  stripeSyncBody,
  TEST_BASES,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

let svc: TestService;
let pool: pg.Pool;
let events: string;
let lsn = 0x1000;

interface Tenant extends TestAccount {
  syncId: string;
  topic: string;
  appender: EventAppender;
}
let A: Tenant;
let B: Tenant;

/** Consumer-group and delivery-log tables: what the attacks below would grow. */
/** Console sessions an account keeps, and errors a sync keeps (src/control/console-sessions.ts, src/sync/status-reporter.ts). */
const MAX_SESSIONS = 20;
const MAX_RECENT_ERRORS = 100;
const STORE_TABLES = ['consumer_groups', 'consumer_group_members', 'consumer_group_offsets', 'consumer_group_positions'];

test.before(
  loudSetUp(
    async () => {
      svc = await startTestService({
        config: { webhookAllowPrivate: true },
        // Sweeps five times a second, and an empty group goes after 2 s idle, so that time passes quickly here.
        tunables: { eventsRest: { groupSweepMs: 200, groupRetentionMs: 2_000 } },
      });
      pool = new pg.Pool({ connectionString: svc.controlUrl, max: 5 });
      events = `http://127.0.0.1:${svc.service.eventsPort}`;
      A = await tenant('tenant a');
      B = await tenant('tenant b');
    },
    () => svc,
  ),
);
test.after(async () => {
  await pool?.end();
  await svc?.stop();
});

/** An account with a Stripe sync and one event in its `customer` topic. */
async function tenant(name: string): Promise<Tenant> {
  const account = await createAccount(svc, name);
  const sync = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(sync.status, 201, sync.text);
  const appender = new EventAppender({ pool, syncId: sync.body.id, accountId: account.id });
  await appender.load();
  const made: Tenant = { ...account, syncId: sync.body.id, topic: topicName(sync.body.id, 'customer'), appender };
  await append(made, ['cus_1']);
  return made;
}

async function append(who: { appender: EventAppender }, recordIds: string[], collection = 'customer'): Promise<void> {
  lsn += 0x100;
  await who.appender.append(
    recordIds.map((id) => ({
      collection,
      recordId: id,
      eventKey: `evk_${randomUUID()}`,
      createdAt: new Date(),
      value: JSON.stringify({ collection, created_at: new Date().toISOString(), data: { id }, event: 'inserted', id, table_db_name: collection }),
    })),
    `0/${lsn.toString(16).toUpperCase()}`,
  );
}

const basic = (who: TestAccount) => `Basic ${Buffer.from(`${who.eventsUsername}:${who.eventsPassword}`).toString('base64')}`;

/** A call to the event REST interface. */
async function rest(who: TestAccount, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(events + path, {
    method: 'POST',
    headers: { authorization: basic(who), 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, text };
}

const consume = (who: TestAccount, group: string, instance: string, topics: string[], headers: Record<string, string> = {}) =>
  rest(who, `/consume/${group}/${instance}`, { topics, timeout: 0 }, { 'kafka-auto-offset-reset': 'earliest', ...headers });

/** Runs `count` calls, `concurrency` at a time. */
async function flood<T>(count: number, concurrency: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await call(i);
      }
    }),
  );
  return results;
}

async function storeBytes(): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    'SELECT sum(coalesce(pg_total_relation_size(to_regclass(t)), 0))::bigint AS bytes FROM unnest($1::text[]) t',
    [STORE_TABLES],
  );
  return Number(rows[0]!.bytes);
}

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params);
  return rows[0]!.n;
}

const statusesOf = (answers: Array<{ status: number }>) => {
  const tally: Record<number, number> = {};
  for (const answer of answers) tally[answer.status] = (tally[answer.status] ?? 0) + 1;
  return tally;
};

/** A webhook destination on loopback that answers each POSTed body with the status `answer` gives. */
async function receiver(answer: (body: string) => number): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => res.writeHead(answer(Buffer.concat(chunks).toString('utf8'))).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** B's consumer reads B's new events: the other tenant is unaffected. */
async function othersStillConsume(group: string): Promise<void> {
  await append(B, [`cus_${randomUUID().slice(0, 8)}`]);
  const read = await consume(B, group, 'b1', [B.topic]);
  assert.is(read.status, 200, read.text);
  assert.ok(read.body.length >= 1, `B read its events: ${read.text}`);
}

test('300 consumes naming 240 junk or foreign topics each store nothing; they are refused alike', async () => {
  const before = await storeBytes();
  // Names that do not compress, as an attacker would pick them.
  const junk = (i: number) => Array.from({ length: 240 }, () => `svc.syn_${String(i).padStart(14, '0')}.${randomBytes(75).toString('hex')}`);
  // Half name 240 junk topics (past the cap on topics per instance), half 100 of which one is B's.
  const answers = await flood(300, 10, (i) => consume(A, `junk-${i}`, 'i1', i % 2 === 0 ? junk(i) : [B.topic, ...junk(i).slice(0, 99)]));
  const grown = (await storeBytes()) - before;
  assert.equal(statusesOf(answers), { 400: 150, 404: 150 }, 'every one refused');
  assert.match(answers[0]!.body.error, /at most 100 topics/);
  assert.match(answers[1]!.body.error, /^unknown topic: /);
  // Unknown and foreign answer the same way, and the answer names no owner.
  const foreign = await consume(A, 'probe', 'i1', [B.topic]);
  const missing = await consume(A, 'probe', 'i1', [B.topic.replace(B.syncId, 'syn_00000000000000')]);
  assert.is(foreign.status, 404);
  assert.equal(foreign.body, { error: `unknown topic: ${B.topic}`, status: 404 });
  assert.is(missing.text.replace('syn_00000000000000', B.syncId), foreign.text);
  // Past the cap on topics per instance, even the account's own are refused (before anything is stored).
  const ownMany = Array.from({ length: 101 }, (_, j) => topicName(A.syncId, `table_${j}`));
  const tooMany = await consume(A, 'many', 'i1', ownMany);
  assert.is(tooMany.status, 400, tooMany.text);
  assert.match(tooMany.body.error, /at most 100 topics/);

  assert.is(await count('consumer_groups WHERE account_id = $1', [A.id]), 0);
  assert.is(await count('consumer_group_members WHERE account_id = $1', [A.id]), 0);
  // Nothing is stored (these 300 calls took 9.4 MB before).
  assert.ok(grown <= 64 * 1024, `the consumer-group tables grew ${grown} bytes`);
  await othersStillConsume('b-after-junk');
});

test('an account keeps at most max_consumer_groups groups: 300 new ones get 50, then 409; commits too', async () => {
  const before = await storeBytes();
  const answers = await flood(300, 10, (i) => consume(A, `fresh-${i}`, 'i1', [A.topic]));
  const grown = (await storeBytes()) - before;
  assert.equal(statusesOf(answers), { 200: 50, 409: 250 });
  const refused = answers.find((a) => a.status === 409)!;
  assert.equal(Object.keys(refused.body).sort(), ['error', 'status']);
  assert.match(refused.body.error, /limit of 50 consumer groups/);
  assert.is(await count('consumer_groups WHERE account_id = $1', [A.id]), 50);
  // An explicit commit would make a group too.
  const commit = await rest(A, '/commit/by-commit/i1', { topic: A.topic, partition: 0, offset: 1 });
  assert.is(commit.status, 409, commit.text);
  // A group it has keeps working, and so does another account.
  const existing = answers.findIndex((a) => a.status === 200);
  const kept = await consume(A, `fresh-${existing}`, 'i1', [A.topic]);
  assert.is(kept.status, 200, kept.text);
  await othersStillConsume('b-beside-groups');
  // 50 groups of one instance each stay under 128 KiB (300 unbounded ones took about 230 KiB).
  assert.ok(grown <= 128 * 1024, `the consumer-group tables grew ${grown} bytes`);

  // The operator raises the limit.
  const raised = await request(svc.api, 'PATCH', `/api/accounts/${A.id}`, { token: svc.adminToken, body: { max_consumer_groups: 51 } });
  assert.is(raised.status, 200, raised.text);
  assert.is(raised.body.limits.max_consumer_groups, 51);
  assert.is((await consume(A, 'one-more', 'i1', [A.topic])).status, 200);
  assert.is((await consume(A, 'two-more', 'i1', [A.topic])).status, 409);
});

test('a group keeps at most max_group_members live instances; stale ones and idle groups are swept without another consume', async () => {
  const C = await tenant('tenant c');
  // Sessions long enough that none lapses during the flood: with 1 s, a flood that took longer
  // beside a burnt core let 24 in, the first ones stale already and rightly not counted (test).
  const shortSession = { 'kafka-session-timeout-ms': '5000' };
  const answers = await flood(40, 8, (i) => consume(C, 'crowd', `i${i}`, [C.topic], shortSession));
  assert.equal(statusesOf(answers), { 200: 20, 409: 20 });
  assert.match(answers.find((a) => a.status === 409)!.body.error, /limit of 20 live instances/);
  assert.is(await count('consumer_group_members WHERE account_id = $1', [C.id]), 20);
  const committed = await rest(C, '/commit/crowd/i0', { topic: C.topic, partition: 0, offset: 1 });
  assert.is(committed.status, 200, committed.text);

  // Nobody consumes again: the sweep alone removes the instances past their session timeout…
  await waitFor(
    'the stale instances swept',
    async () => ((await count('consumer_group_members WHERE account_id = $1', [C.id])) === 0 ? true : undefined),
    20_000,
  );
  // …and then the empty group, its committed offsets with it, once idle past the retention.
  await waitFor('the idle group swept', async () => ((await count('consumer_groups WHERE account_id = $1', [C.id])) === 0 ? true : undefined), 10_000);
  assert.is(await count('consumer_group_offsets WHERE account_id = $1', [C.id]), 0);
  // The room is free again.
  assert.is((await consume(C, 'crowd', 'late', [C.topic])).status, 200);
});

test('committed offsets of a deleted sync go, while the group lives on', async () => {
  const D = await createAccount(svc, 'tenant d');
  const made = await request(svc.api, 'POST', '/api/syncs', { token: D.token, body: airtableSyncBody(TEST_BASES[0]) });
  assert.is(made.status, 201, made.text);
  const stripe = await request(svc.api, 'POST', '/api/syncs', { token: D.token, body: stripeSyncBody() });
  assert.is(stripe.status, 201, stripe.text);
  const gone = { appender: new EventAppender({ pool, syncId: made.body.id, accountId: D.id }) };
  const kept = { appender: new EventAppender({ pool, syncId: stripe.body.id, accountId: D.id }) };
  await gone.appender.load();
  await kept.appender.load();
  await append(gone, ['rec1'], 'table_one');
  await append(kept, ['cus_1']);
  const goneTopic = topicName(made.body.id, 'table_one');
  const keptTopic = topicName(stripe.body.id, 'customer');
  assert.is((await consume(D, 'lives', 'i1', [keptTopic])).status, 200);
  for (const topic of [goneTopic, keptTopic]) assert.is((await rest(D, '/commit/lives/i1', { topic, partition: 0, offset: 1 })).status, 200);
  assert.is((await request(svc.api, 'DELETE', `/api/syncs/${made.body.id}`, { token: D.token })).status, 200);
  await waitFor('the offsets of the deleted topic swept', async () =>
    (await count('consumer_group_offsets WHERE account_id = $1 AND topic = $2', [D.id, goneTopic])) === 0 ? true : undefined,
  );
  assert.is(await count('consumer_group_offsets WHERE account_id = $1 AND topic = $2', [D.id, keptTopic]), 1);
});

test('an account has at most max_webhooks webhooks, however many are asked for at once', async () => {
  const E = await createAccount(svc, 'tenant e');
  const sync = await request(svc.api, 'POST', '/api/syncs', { token: E.token, body: stripeSyncBody() });
  assert.is(sync.status, 201, sync.text);
  const body = { url: 'http://127.0.0.1:1/hook', topics: [topicName(sync.body.id, 'customer')] };
  const create = () => request(svc.api, 'POST', `/api/syncs/${sync.body.id}/webhooks`, { token: E.token, body });
  // 40 at once against the sync's own cap of 25: no race lets more in.
  assert.equal(statusesOf(await flood(40, 40, create)), { 201: 25, 409: 15 });
  assert.is(await count('webhook_destinations WHERE account_id = $1', [E.id]), 25);

  assert.is((await request(svc.api, 'PATCH', `/api/accounts/${E.id}`, { token: svc.adminToken, body: { max_webhooks: 3 } })).status, 200);
  const other = await request(svc.api, 'POST', '/api/syncs', { token: E.token, body: airtableSyncBody(TEST_BASES[1]) });
  assert.is(other.status, 201, other.text);
  const refused = await request(svc.api, 'POST', `/api/syncs/${other.body.id}/webhooks`, {
    token: E.token,
    body: { url: 'http://127.0.0.1:1/hook', topics: [topicName(other.body.id, 'table')] },
  });
  assert.is(refused.status, 409, refused.text);
  assert.match(refused.body.error.message, /limit of 3 webhooks/);
  assert.is(await count('webhook_destinations WHERE account_id = $1', [E.id]), 25);
});

test('a failing webhook keeps at most maxExhausted deliveries, counts what it dropped, and keeps no copy of delivered events', async () => {
  const F = await createAccount(svc, 'tenant f');
  const sync = await request(svc.api, 'POST', '/api/syncs', { token: F.token, body: stripeSyncBody() });
  const syncId: string = sync.body.id;
  // The first attempt of each event fails, the retry succeeds, except for `doomed` records.
  const seen = new Set<string>();
  const { url, close } = await receiver((body) => {
    const id = JSON.parse(body).id as string;
    if (id.startsWith('doomed') || !seen.has(id)) {
      seen.add(id);
      return 500;
    }
    return 200;
  });
  const hook = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: F.token,
    body: { url, topics: [topicName(syncId, 'customer')] },
  });
  assert.is(hook.status, 201, hook.text);
  const logger = createLogger({ level: 'warn', destination: svc.logs });
  const bus = new EventBus({ url: svc.controlUrl, logger });
  await bus.start();
  let deliverer: WebhookDeliverer | undefined;
  try {
    deliverer = startWebhookDeliverer({
      pool,
      box: SecretBox.fromBase64(await readFile(path.join(svc.dataDir, 'secret-key'), 'utf8')),
      syncId,
      reader: new EventLogReader(pool),
      bus,
      logger,
      allowPrivate: true,
      schedule: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: 2, timeoutMs: 2_000 },
      tuning: { pruneEveryMs: 100, maxExhausted: 5 },
    });
    const appender = { appender: new EventAppender({ pool, syncId, accountId: F.id }) };
    await appender.appender.load();
    await append(
      appender,
      Array.from({ length: 30 }, (_, i) => `doomed_${i}`),
    );
    await append(
      appender,
      Array.from({ length: 5 }, (_, i) => `fine_${i}`),
    );
    const detail = await waitFor(
      'the oldest exhausted deliveries dropped',
      async () => {
        const shown = await request(svc.api, 'GET', `/api/syncs/${syncId}/webhooks/${hook.body.id}`, { token: F.token });
        return shown.body.deliveries.dropped === 25 && shown.body.deliveries.delivered === 5 ? shown.body : undefined;
      },
      30_000,
    );
    assert.is(detail.deliveries.exhausted, 5);
    const kept = await pool.query<{ record_id: string }>("SELECT record_id FROM webhook_deliveries WHERE destination_id = $1 AND status = 'exhausted'", [
      hook.body.id,
    ]);
    assert.is(kept.rows.length, 5);
    assert.ok(kept.rows.every((r) => r.record_id.startsWith('doomed_')));
    const delivered = await pool.query<{ bytes: number }>(
      "SELECT max(octet_length(value))::int AS bytes FROM webhook_deliveries WHERE destination_id = $1 AND status = 'delivered'",
      [hook.body.id],
    );
    assert.is(delivered.rows[0]!.bytes, 0, 'a delivered row keeps no copy of the event');
    assert.match(svc.logs.text, /dropped the oldest exhausted webhook deliveries past the cap/);
  } finally {
    await deliverer?.stop();
    await bus.stop();
    await close();
  }
});

test(`an account keeps at most ${MAX_SESSIONS} console sessions: 60 sign-ins end the least recently used`, async () => {
  const G = await createAccount(svc, 'tenant g');
  const signIn = async (token: string) => {
    const answer = await request(svc.api, 'POST', '/console/session', { body: { token }, headers: { origin: svc.api, 'sec-fetch-site': 'same-origin' } });
    assert.is(answer.status, 200, answer.text);
    return /^([^;]+)/.exec(answer.headers.get('set-cookie') ?? '')![1]!;
  };
  const whoAmI = (cookie: string) => request(svc.api, 'GET', '/console/session', { headers: { cookie, origin: svc.api, 'sec-fetch-site': 'same-origin' } });
  const other = await signIn(B.token);
  const cookies = await flood(60, 6, () => signIn(G.token));
  assert.is(await count('console_sessions WHERE account_id = $1', [G.id]), MAX_SESSIONS);
  assert.is((await whoAmI(cookies.at(-1)!)).status, 200, 'the newest session works');
  const alive = await Promise.all(cookies.map(async (cookie) => (await whoAmI(cookie)).status === 200));
  assert.is(alive.filter(Boolean).length, MAX_SESSIONS);
  assert.is((await whoAmI(other)).status, 200, "another account's session is untouched");
});

test(`a sync failing fast keeps its ${MAX_RECENT_ERRORS} newest errors`, async () => {
  const reporter = new StatusReporter({ control: pool, target: pool, schemas: PUBLIC_SCHEMAS, syncId: A.syncId, logger: fileLogger() });
  for (let i = 0; i < MAX_RECENT_ERRORS + 50; i++) await reporter.failed(`upstream refused, attempt ${i}`, 'transient');
  assert.is(await count('sync_errors WHERE sync_id = $1', [A.syncId]), MAX_RECENT_ERRORS);
  const history = await request(svc.api, 'GET', `/api/syncs/${A.syncId}/history?hours=1`, { token: A.token });
  assert.is(history.status, 200, history.text);
  assert.match(JSON.stringify(history.body), new RegExp(`attempt ${MAX_RECENT_ERRORS + 49}`));
});

test.run();
