/**
 * The at-least-once guarantee under a crash: the service is killed with SIGKILL while
 * 100k row changes stream through a sync database, then started again. Every change must
 * arrive on REST, on a webhook and on Kafka; per-record order must hold; a change seen
 * twice must carry the same idempotency key both times.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startFakeAirtable, type FakeAirtable } from '../fakes/airtable/index.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { sharedKafka } from './harness/kafka/index.ts';
import { freshDatabase, query, serverAdminUrl } from './harness/postgres.ts';
import { freePort } from './harness/ports.ts';
import { type Spawned, spawnTributary, waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, loudSetUp, request } from './harness/service.ts';

const RECORDS = 20_000;
const VERSIONS = 5; // an insert and four updates per record: 100k changes
const TOTAL = RECORDS * VERSIONS;
const ADMIN = 'tra_test_events_crash_admin_token';

let airtable: FakeAirtable;
let dataDir: string;
let controlUrl: string;
let env: Record<string, string>;
let api: string;
let restUrl: string;
let brokers: string[];
let saslBrokers: string[];
/** Account A of the first test: its event credentials and its topic. */
let first: { username: string; password: string; topic: string } | undefined;

/** One observed delivery: which record, which version of it, under which idempotency key. */
interface Seen {
  id: string;
  v: number;
  key: string;
}

test.before(
  loudSetUp(
    async () => {
      airtable = await startFakeAirtable({ port: 0 });
      airtable.addToken(AIRTABLE_TEST_TOKEN, { bases: '*' });
      airtable.createBase({ id: 'appCRASHCRASHCRAS', name: 'Crash' });
      const broker = await sharedKafka();
      brokers = broker.brokers;
      saslBrokers = broker.saslBrokers;
      dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-events-crash-'));
      controlUrl = await freshDatabase('ctl');
      const [apiPort, eventsPort] = [await freePort(), await freePort()];
      env = {
        TRIBUTARY_DATA_DIR: dataDir,
        DATABASE_URL: controlUrl,
        TRIBUTARY_TARGET_DATABASE_URL: serverAdminUrl(),
        TRIBUTARY_ADMIN_TOKEN: ADMIN,
        TRIBUTARY_API_PORT: String(apiPort),
        TRIBUTARY_EVENTS_PORT: String(eventsPort),
        // No sync role: the test writes the row changes itself, as a sync worker would.
        TRIBUTARY_ROLES: 'api,decoder,events',
        TRIBUTARY_UPSTREAMS: `api.airtable.com=${airtable.url}`,
        TRIBUTARY_WEBHOOK_ALLOW_PRIVATE: '1',
        // 100k changes to one receiver of the test's own: at the default 1,000 a second to one
        // host they take 100 s to deliver, which is not what this file checks.
        TRIBUTARY_WEBHOOK_MAX_PER_HOST_PER_SECOND: '10000',
        TRIBUTARY_WEBHOOK_MAX_PER_ACCOUNT_PER_SECOND: '10000',
        KAFKA_BROKERS: brokers.join(','),
      };
      api = `http://127.0.0.1:${apiPort}`;
      restUrl = `http://127.0.0.1:${eventsPort}`;
    },
    () => undefined,
  ),
);

test.after(async () => {
  await airtable?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

async function start(): Promise<Spawned> {
  const proc = spawnTributary(['run'], env);
  await waitFor('healthz', async () => {
    if (proc.child.exitCode !== null) throw new Error(`exited early: ${proc.output()}`);
    return (await request(api, 'GET', '/healthz')).status === 200 ? true : undefined;
  });
  return proc;
}

/** A webhook receiver that remembers every delivery, duplicates included. */
async function receiver(): Promise<{ url: string; seen: Seen[]; close(): void }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const event = JSON.parse(body) as { id: string; data: { v: number } };
      seen.push({ id: event.id, v: event.data.v, key: String(req.headers['webhook-id']) });
      res.writeHead(200).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, seen, close: () => server.close() };
}

/** Every change is there, in order per record; a repeat has the same key as the first time. */
function checkDelivery(path: string, seen: Seen[]): void {
  const keyOf = new Map<string, string>();
  const last = new Map<string, number>();
  let duplicates = 0;
  for (const s of seen) {
    const change = `${s.id}@${s.v}`;
    const known = keyOf.get(change);
    if (known !== undefined) {
      assert.is(s.key, known, `${path}: a repeat of ${change} carries its first key`);
      duplicates++;
      continue;
    }
    keyOf.set(change, s.key);
    const before = last.get(s.id) ?? -1;
    assert.is(s.v, before + 1, `${path}: ${s.id} went from version ${before} to ${s.v}`);
    last.set(s.id, s.v);
  }
  assert.is(keyOf.size, TOTAL, `${path}: every change arrived (${keyOf.size} of ${TOTAL}, ${duplicates} repeats)`);
  assert.is(new Set(keyOf.values()).size, TOTAL, `${path}: one key per change`);
}

async function restAll(topic: string, username: string, password: string): Promise<Seen[]> {
  const seen: Seen[] = [];
  let offset = 0;
  const auth = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  while (seen.length < TOTAL) {
    const answer = await fetch(`${restUrl}/fetch`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({ topic, partition: 0, offset, timeout: 1000 }),
    });
    assert.is(answer.status, 200, await answer.clone().text());
    const messages = (await answer.json()) as Array<{ offset: number; key: string; value: string }>;
    if (messages.length === 0) break;
    for (const m of messages) {
      const event = JSON.parse(m.value) as { id: string; data: { v: number } };
      seen.push({ id: event.id, v: event.data.v, key: m.key });
    }
    offset = messages.at(-1)!.offset + 1;
  }
  return seen;
}

async function kafkaAll(topic: string): Promise<Seen[]> {
  const kafka = new Kafka({ clientId: 'crash-test', brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `crash-${Date.now()}` });
  const seen: Seen[] = [];
  const distinct = new Set<string>();
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Kafka: ${distinct.size} of ${TOTAL} changes within 120 s`)), 120_000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            const event = JSON.parse(message.value!.toString()) as { id: string; data: { v: number } };
            assert.is(message.key?.toString(), event.id, 'the message key is the record id');
            seen.push({ id: event.id, v: event.data.v, key: String(message.headers?.['svc-event-id']) });
            distinct.add(`${event.id}@${event.data.v}`);
            if (distinct.size === TOTAL) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return seen;
}

test('100k changes with a SIGKILL in the middle: all arrive on REST, webhooks and Kafka, in order per record', async () => {
  let proc = await start();
  const hook = await receiver();
  let writer: pg.Pool | undefined;
  try {
    const account = await request(api, 'POST', '/api/accounts', { token: ADMIN, body: { name: 'crash' } });
    const { api_token: token, events: credentials } = account.body;
    const created = await request(api, 'POST', '/api/syncs', {
      token,
      body: { kind: 'airtable', base_id: 'appCRASHCRASHCRAS', api_key: AIRTABLE_TEST_TOKEN },
    });
    assert.is(created.status, 201, created.text);
    const syncId = created.body.id as string;
    const admin = new URL(serverAdminUrl());
    const dbUrl = new URL(created.body.database.url as string);
    dbUrl.username = admin.username;
    dbUrl.password = admin.password;
    writer = new pg.Pool({ connectionString: dbUrl.toString(), max: 1 });
    const shape = {
      schema: 'public',
      name: 'items',
      key: 'id',
      columns: [
        { name: 'id', type: 'text' },
        { name: 'v', type: 'integer' },
      ],
    };
    for (const statement of createTableStatements(shape)) await writer.query(statement);
    const topic = `svc.${syncId}.items`;
    first = { username: credentials.username, password: credentials.password, topic };
    const webhook = await request(api, 'POST', `/api/syncs/${syncId}/webhooks`, { token, body: { url: hook.url, topics: [topic] } });
    assert.is(webhook.status, 201, webhook.text);

    // The stream: every record inserted, then updated four times, 1,000 rows a transaction.
    const logged = async () =>
      Number((await query<{ n: string }>(controlUrl, 'SELECT coalesce(max(seq), 0) AS n FROM decoder_progress WHERE sync_id = $1', [syncId]))[0]?.n ?? 0);
    const writing = (async () => {
      for (let v = 0; v < VERSIONS; v++) {
        for (let start = 0; start < RECORDS; start += 1000) {
          if (v === 0) {
            await writer!.query(`INSERT INTO items SELECT 'rec' || g, 0 FROM generate_series($1::int, $2::int) g`, [start, start + 999]);
          } else {
            await writer!.query(`UPDATE items SET v = $3 WHERE id IN (SELECT 'rec' || g FROM generate_series($1::int, $2::int) g)`, [start, start + 999, v]);
          }
        }
      }
    })();
    await waitFor('a third of the changes logged', async () => ((await logged()) >= TOTAL / 3 ? true : undefined), 120_000);
    proc.child.kill('SIGKILL');
    await proc.exited;
    await writing;
    // The dead process's leases would lapse in 30 s; end them now rather than wait.
    await query(controlUrl, 'UPDATE syncs SET decoder_lease_until = now() WHERE id = $1', [syncId]);
    proc = await start();

    await waitFor('every change logged', async () => ((await logged()) >= TOTAL ? true : undefined), 180_000);
    const duplicatesInLog = await query<{ n: string }>(controlUrl, 'SELECT count(*) - count(DISTINCT event_key) AS n FROM events WHERE sync_id = $1', [syncId]);
    assert.is(duplicatesInLog[0]!.n, '0', 'the log itself holds each change once');

    checkDelivery('REST', await restAll(topic, credentials.username, credentials.password));
    const distinct = () => new Set(hook.seen.map((s) => `${s.id}@${s.v}`)).size;
    await waitFor('every webhook delivery', async () => (distinct() >= TOTAL ? true : undefined), 240_000).catch((error: unknown) => {
      throw new Error(`${String(error)}: ${distinct()} of ${TOTAL}`);
    });
    checkDelivery('webhooks', hook.seen);
    checkDelivery('Kafka', await kafkaAll(topic));
  } catch (error) {
    process.stderr.write(`service output:\n${proc.output().slice(-4000)}\n`);
    throw error;
  } finally {
    hook.close();
    await writer?.end();
    proc.child.kill('SIGTERM');
    await proc.exited;
  }
});

test("an account's event credentials read its own topics from Kafka, and not another account's", async () => {
  assert.ok(first, 'the first test ran');
  airtable.createBase({ id: 'appCRASHOTHERBASE', name: 'Other' });
  const proc = await start();
  try {
    const other = await request(api, 'POST', '/api/accounts', { token: ADMIN, body: { name: 'other' } });
    const created = await request(api, 'POST', '/api/syncs', {
      token: other.body.api_token,
      body: { kind: 'airtable', base_id: 'appCRASHOTHERBASE', api_key: AIRTABLE_TEST_TOKEN },
    });
    assert.is(created.status, 201, created.text);
    const scram = (username: string, password: string) =>
      new Kafka({ clientId: 'scram-test', brokers: saslBrokers, sasl: { mechanism: 'scram-sha-256', username, password }, logLevel: logLevel.NOTHING });

    // A reads its own topic (the group name starts with its username, as the README asks).
    const mine = scram(first.username, first.password).consumer({ groupId: `${first.username}.reader` });
    await mine.connect();
    const received = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('A could not read its own topic')), 60_000);
      void mine
        .subscribe({ topic: first!.topic, fromBeginning: true })
        .then(() =>
          mine.run({
            eachMessage: async ({ message }) => {
              clearTimeout(timer);
              resolve(message.key!.toString());
            },
          }),
        )
        .catch(reject);
    });
    await mine.disconnect();
    assert.match(received, /^rec\d+$/);

    // B's credentials get nothing of A's topic.
    const admin = scram(other.body.events.username, other.body.events.password).admin();
    await admin.connect();
    const refused = await admin.fetchTopicMetadata({ topics: [first.topic] }).then(
      () => undefined,
      (error: Error & { type?: string }) => error,
    );
    await admin.disconnect();
    assert.ok(refused, "B must not see A's topic");
    assert.match(String((refused as { type?: string }).type ?? refused.message), /TOPIC_AUTHORIZATION_FAILED|not authorized/i);

    // Everything the service printed, its Kafka relay's client included, is its JSON log
    // (Node 24 printed kafkajs's negative-timer warning as bare text at every connection).
    const bare = proc
      .output()
      .split('\n')
      .filter((line) => line.trim() && !line.startsWith('{'));
    assert.equal(bare, [], 'lines outside the log');
  } finally {
    proc.child.kill('SIGTERM');
    await proc.exited;
  }
});

test.run();
