/**
 * The event REST interface on a real control database and a real HTTP server,
 * driven by the real @upstash/kafka client where it can be: fetch, long polls, consumer
 * groups with auto and manual commits, partition sharing and hand-over, account isolation,
 * and the 4xx answers to bad input. Events are put in the log with EventAppender, the
 * decoder's own writer, so the bus wakes readers through PostgreSQL's NOTIFY as in production.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { Writable } from 'node:stream';
import { Kafka, type Message } from '@upstash/kafka';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountStore } from '../src/control/accounts.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { EventAppender, partitionOf, type NewEvent } from '../src/events/append.ts';
import { EventBus } from '../src/events/bus.ts';
import { EventLogReader, topicName } from '../src/events/log.ts';
import { createEventsRestHandler, type EventsRestHandler } from '../src/events/rest/server.ts';
import { listen, type RunningServer } from '../src/http/listen.ts';
import { newSecretKey, newSyncId } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import { freshDatabase } from './harness/postgres.ts';

interface Creds {
  id: string;
  username: string;
  password: string;
}

const logLines: string[] = [];
const logger = createLogger({
  level: 'warn',
  destination: new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString());
      done();
    },
  }),
});

let pool: pg.Pool;
let accounts: AccountStore;
let bus: EventBus;
let handler: EventsRestHandler;
let server: RunningServer;
let base: string;
let A: Creds;
let B: Creds;
let kafkaA: Kafka;
let kafkaB: Kafka;
const syncA = newSyncId();
const syncP = newSyncId(); // A's sync with four partitions per topic
const syncB = newSyncId();
let appenderA: EventAppender;
let appenderP: EventAppender;
let appenderB: EventAppender;
let lsnCounter = 1;

test.before(async () => {
  const url = await freshDatabase('evrest');
  await migrateControlDatabase(url, logger);
  pool = new pg.Pool({ connectionString: url, max: 10 });
  accounts = new AccountStore(pool, new SecretBox(newSecretKey()));
  const creds = async (name: string): Promise<Creds> => {
    const made = await accounts.create(name);
    return { id: made.account.id, username: made.account.eventsUsername, password: made.eventsPassword.reveal() };
  };
  A = await creds('account a');
  B = await creds('account b');
  bus = new EventBus({ url, logger });
  await bus.start();
  handler = createEventsRestHandler({ pool, accounts, reader: new EventLogReader(pool), bus, logger });
  server = await listen(handler, { host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${server.port}`;
  kafkaA = new Kafka({ url: base, username: A.username, password: A.password });
  kafkaB = new Kafka({ url: base, username: B.username, password: B.password });
  appenderA = new EventAppender({ pool, syncId: syncA, accountId: A.id });
  appenderP = new EventAppender({ pool, syncId: syncP, accountId: A.id, partitions: 4 });
  appenderB = new EventAppender({ pool, syncId: syncB, accountId: B.id });
  await Promise.all([appenderA.load(), appenderP.load(), appenderB.load()]);
});

test.after(async () => {
  await handler?.close();
  await server?.close();
  await bus?.stop();
  await pool?.end();
});

// ---------------------------------------------------------------------------------------
// Helpers

function nextLsn(): string {
  lsnCounter += 1;
  return `0/${(lsnCounter * 256).toString(16).toUpperCase()}`;
}

function newEvent(collection: string, recordId: string): NewEvent {
  const createdAt = new Date();
  const value = JSON.stringify({
    collection,
    created_at: createdAt.toISOString(),
    data: { id: recordId, name: `name of ${recordId}` },
    event: 'inserted',
    id: recordId,
    table_db_name: collection,
  });
  return { collection, recordId, eventKey: `evk_${randomUUID()}`, createdAt, value };
}

/** Appends one event per record id, as one committed transaction. */
async function append(appender: EventAppender, collection: string, recordIds: string[]): Promise<NewEvent[]> {
  const events = recordIds.map((id) => newEvent(collection, id));
  await appender.append(events, nextLsn());
  return events;
}

const ids = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}${i}`);
const keysOf = (messages: Message[]) => messages.map((m) => m.key);
const offsetsOf = (messages: Message[]) => messages.map((m) => m.offset);

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
  text: string;
}

const basic = (c: { username: string; password: string }) => `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;

/** A raw HTTP call (GET may carry a body here, as the Upstash API allows). */
function call(
  method: string,
  path: string,
  options: { base?: string; auth?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; chunked?: boolean } = {},
): Promise<Answer> {
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  const headers: Record<string, string | number> = { ...options.headers };
  if (options.auth) headers.authorization = options.auth;
  if (payload !== undefined && !options.chunked) headers['content-length'] = Buffer.byteLength(payload);
  return new Promise((resolve, reject) => {
    const req = http.request(`${options.base ?? base}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text });
      });
    });
    // The server may answer (413) and close before the whole body is written.
    req.on('error', (err) => reject(err));
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

const asA = () => basic(A);
const asB = () => basic(B);

function assertError(answer: Answer, status: number, what: string): void {
  assert.is(answer.status, status, `${what}: ${answer.text}`);
  assert.type(answer.body?.error, 'string', `${what}: error is a string`);
  assert.ok(answer.body.error.length > 0, `${what}: error says something`);
  assert.is(answer.body.status, status, `${what}: status field`);
  assert.equal(Object.keys(answer.body).sort(), ['error', 'status'], `${what}: only error and status`);
}

async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work;
  return { value, ms: Date.now() - started };
}

// ---------------------------------------------------------------------------------------

test('fetch returns exactly the appended events, in offset order, with their keys and headers', async () => {
  const topic = topicName(syncA, 'customer');
  const events = await append(appenderA, 'customer', ids('cus_', 5));
  const consumer = kafkaA.consumer();

  const all = await consumer.fetch({ topic, partition: 0, offset: 0, timeout: 1000 });
  assert.equal(offsetsOf(all), [0, 1, 2, 3, 4]);
  assert.equal(
    keysOf(all),
    events.map((e) => e.eventKey),
  );
  all.forEach((message, i) => {
    const event = events[i]!;
    assert.is(message.topic, topic);
    assert.is(message.partition, 0);
    assert.type(message.offset, 'number');
    assert.is(message.timestamp, event.createdAt.getTime());
    assert.is(message.value, event.value);
    assert.equal(JSON.parse(message.value).id, event.recordId);
    assert.equal(message.headers, [
      { key: 'svc-event-id', value: event.eventKey },
      { key: 'svc-record-id', value: event.recordId },
    ]);
  });

  const tail = await consumer.fetch({ topic, partition: 0, offset: 3, timeout: 0 });
  assert.equal(offsetsOf(tail), [3, 4]);
  assert.equal(
    keysOf(tail),
    events.slice(3).map((e) => e.eventKey),
  );

  // Several partitions at once: the client's default sends one request per partition, with
  // parallel: false it sends one request holding them all; combined with a single triple too.
  const invoices = await append(appenderA, 'invoice', ids('in_', 2));
  const invoiceTopic = topicName(syncA, 'invoice');
  const topicPartitionOffsets = [
    { topic, partition: 0, offset: 4 },
    { topic: invoiceTopic, partition: 0, offset: 0 },
  ];
  const expected = [events[4]!.eventKey, ...invoices.map((e) => e.eventKey)].sort();
  const parallel = await consumer.fetch({ topicPartitionOffsets, timeout: 500 });
  assert.equal(keysOf(parallel).sort(), expected);
  const single = await consumer.fetch({ topicPartitionOffsets, timeout: 500 }, { parallel: false });
  assert.equal(keysOf(single).sort(), expected);
  const combined = await consumer.fetch(
    { topic: invoiceTopic, partition: 0, offset: 1, topicPartitionOffsets: [{ topic, partition: 0, offset: 2 }], timeout: 0 },
    { parallel: false },
  );
  assert.equal(keysOf(combined).sort(), [invoices[1]!.eventKey, ...events.slice(2).map((e) => e.eventKey)].sort());
  assert.equal(
    combined.filter((m) => m.topic === topic).map((m) => m.offset),
    [2, 3, 4],
    'per partition, offset order',
  );

  // The raw answer, as a non-client caller sees it (curl -d sends a form content type).
  const raw = await call('POST', '/fetch', {
    auth: asA(),
    raw: JSON.stringify({ topic, partition: 0, offset: 4 }),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.is(raw.status, 200);
  assert.equal(raw.body, [
    {
      topic,
      partition: 0,
      offset: 4,
      timestamp: events[4]!.createdAt.getTime(),
      key: events[4]!.eventKey,
      value: events[4]!.value,
      headers: [
        { key: 'svc-event-id', value: events[4]!.eventKey },
        { key: 'svc-record-id', value: events[4]!.recordId },
      ],
    },
  ]);
  const viaGet = await call('GET', '/fetch', { auth: asA(), body: { topic, partition: 0, offset: 0, timeout: 0 } });
  assert.equal(
    viaGet.body.map((m: Message) => m.key),
    events.map((e) => e.eventKey),
  );
});

test('a fetch long poll wakes when events are logged, well before its timeout; with none it waits the timeout', async () => {
  const topic = topicName(syncA, 'customer');
  const { next } = await new EventLogReader(pool).offsets(topic, 0);
  const waiting = timed(kafkaA.consumer().fetch({ topic, partition: 0, offset: Number(next), timeout: 10_000 }));
  await new Promise((r) => setTimeout(r, 300));
  const [event] = await append(appenderA, 'customer', ['cus_late']);
  const { value, ms } = await waiting;
  assert.equal(keysOf(value), [event!.eventKey]);
  assert.equal(offsetsOf(value), [Number(next)]);
  assert.ok(ms >= 250 && ms < 3000, `woke after ${ms} ms`);

  const quiet = await timed(kafkaA.consumer().fetch({ topic, partition: 0, offset: Number(next) + 100, timeout: 600 }));
  assert.equal(quiet.value, []);
  assert.ok(quiet.ms >= 550, `waited ${quiet.ms} ms`);
});

test('a consume long poll wakes on new events, also for a topic of the account that had no event yet', async () => {
  const consumer = kafkaA.consumer();
  const topic = topicName(syncA, 'customer');
  const drained = await consumer.consume({ consumerGroupId: 'waker', instanceId: 'w1', topics: [topic], autoOffsetReset: 'earliest', timeout: 0 });
  assert.ok(drained.length >= 6, `drained ${drained.length}`);
  const waiting = timed(consumer.consume({ consumerGroupId: 'waker', instanceId: 'w1', topics: [topic], timeout: 10_000 }));
  await new Promise((r) => setTimeout(r, 300));
  const [event] = await append(appenderA, 'customer', ['cus_woken']);
  const { value, ms } = await waiting;
  assert.equal(keysOf(value), [event!.eventKey]);
  assert.ok(ms >= 250 && ms < 3000, `woke after ${ms} ms`);

  // A sync of the account whose topic does not exist yet: the first event wakes the consumer.
  const syncC = newSyncId();
  await pool.query(
    `INSERT INTO syncs (id, account_id, kind, api_key_enc, settings, database_name, database_role, database_password_enc, state)
     VALUES ($1, $2, 'stripe', 'sealed', '{}', $3, $3, 'sealed', 'active')`,
    [syncC, A.id, `tr_${syncC}`],
  );
  const appenderC = new EventAppender({ pool, syncId: syncC, accountId: A.id });
  await appenderC.load();
  const productTopic = topicName(syncC, 'product');
  const first = timed(consumer.consume({ consumerGroupId: 'waker', instanceId: 'w2', topics: [productTopic], autoOffsetReset: 'earliest', timeout: 10_000 }));
  await new Promise((r) => setTimeout(r, 300));
  const [product] = await append(appenderC, 'product', ['prod_1']);
  const got = await first;
  assert.equal(keysOf(got.value), [product!.eventKey]);
  assert.ok(got.ms >= 250 && got.ms < 3000, `woke after ${got.ms} ms`);
});

test('consume auto-commits what it handed out at the next consume; a new instance continues where the group left off', async () => {
  const topic = topicName(syncA, 'order');
  const first = await append(appenderA, 'order', ids('ord_', 3));
  const consumer = kafkaA.consumer();
  const admin = kafkaA.admin();
  const committedOffset = async () =>
    (await consumer.committed({ consumerGroupId: 'billing', instanceId: 'i1', topicPartitions: [{ topic, partition: 0 }] }))[0]!.offset;

  const batch1 = await consumer.consume({ consumerGroupId: 'billing', instanceId: 'i1', topics: [topic], autoOffsetReset: 'earliest', timeout: 1000 });
  assert.equal(
    keysOf(batch1),
    first.map((e) => e.eventKey),
  );
  assert.equal(offsetsOf(batch1), [0, 1, 2]);
  assert.is(await committedOffset(), -1, 'handed out is not yet committed');

  const second = await append(appenderA, 'order', ids('ord_b', 2));
  const batch2 = await consumer.consume({ consumerGroupId: 'billing', instanceId: 'i1', topics: [topic], timeout: 1000 });
  assert.equal(
    keysOf(batch2),
    second.map((e) => e.eventKey),
  );
  assert.is(await committedOffset(), 3, 'the next consume committed the first batch');

  // Removing the instance commits what it was handed (as closing a Kafka consumer does).
  await admin.removeConsumerInstance('billing', 'i1');
  assert.is(await committedOffset(), 5);

  const third = await append(appenderA, 'order', ids('ord_c', 2));
  // "latest" only applies without a committed offset: the group's offset wins.
  const batch3 = await consumer.consume({ consumerGroupId: 'billing', instanceId: 'i2', topics: [topic], autoOffsetReset: 'latest', timeout: 1000 });
  assert.equal(
    keysOf(batch3),
    third.map((e) => e.eventKey),
  );
  assert.equal(offsetsOf(batch3), [5, 6]);

  // The path variant answers the same way.
  const fourth = await append(appenderA, 'order', ['ord_d']);
  const viaPath = await call('GET', `/consume/billing/i2/${encodeURIComponent(topic)}?timeout=500`, { auth: asA() });
  assert.is(viaPath.status, 200);
  assert.equal(
    viaPath.body.map((m: Message) => m.key),
    [fourth[0]!.eventKey],
  );
  assert.is(await committedOffset(), 7);
});

test('instances of a group share the partitions; a stale instance’s partitions move on and its batch comes again', async () => {
  const topic = topicName(syncP, 'charge');
  await append(appenderP, 'charge', ids('ch_seed', 8));
  const consumeRaw = async (instance: string) => {
    const answer = await call('POST', `/consume/shared/${instance}`, {
      auth: asA(),
      body: { topics: [topic], timeout: 0 },
      headers: { 'Kafka-Session-Timeout-Ms': '1000', 'Kafka-Auto-Offset-Reset': 'latest' },
    });
    assert.is(answer.status, 200, answer.text);
    return answer.body as Message[];
  };
  assert.equal(await consumeRaw('i1'), []);
  assert.equal(await consumeRaw('i2'), []);
  assert.equal(await consumeRaw('i1'), []);

  const groups = await kafkaA.admin().consumers();
  const shared = groups.find((g) => g.name === 'shared')!;
  const partitionsOf = (instance: string) => shared.instances.find((i) => i.name === instance)!.topics.flatMap((t) => (t.topic === topic ? t.partitions : []));
  const p1 = partitionsOf('i1');
  const p2 = partitionsOf('i2');
  assert.is(p1.length, 2);
  assert.is(p2.length, 2);
  assert.equal([...p1, ...p2].sort(), [0, 1, 2, 3]);

  const events = await append(appenderP, 'charge', ids('ch_', 40));
  const r1 = await consumeRaw('i1');
  const r2 = await consumeRaw('i2');
  assert.ok(r1.length > 0 && r2.length > 0, 'both instances got work');
  assert.ok(
    r1.every((m) => p1.includes(m.partition)),
    'i1 reads only its partitions',
  );
  assert.ok(
    r2.every((m) => p2.includes(m.partition)),
    'i2 reads only its partitions',
  );
  assert.equal(keysOf([...r1, ...r2]).sort(), events.map((e) => e.eventKey).sort(), 'together exactly the new events');
  for (const messages of [r1, r2]) {
    for (const p of [0, 1, 2, 3]) {
      const offsets = messages.filter((m) => m.partition === p).map((m) => m.offset);
      assert.equal(
        offsets,
        [...offsets].sort((a, b) => a - b),
        `partition ${p} in offset order`,
      );
    }
  }
  // Each record's events are in the partition partitionOf() gives it.
  for (const m of [...r1, ...r2]) assert.is(m.partition, partitionOf(JSON.parse(m.value).id, 4));

  // i1 goes silent. After its session timeout, i2's next consume takes its partitions over,
  // from the committed offsets: i1's last batch was never committed, so it comes again.
  const later = await append(appenderP, 'charge', ids('ch_late', 8));
  await new Promise((r) => setTimeout(r, 1300));
  const takeover = await consumeRaw('i2');
  const expected = [...keysOf(r1), ...later.map((e) => e.eventKey)].sort();
  assert.equal(keysOf(takeover).sort(), expected);
  const after = (await kafkaA.admin().consumers()).find((g) => g.name === 'shared')!;
  assert.equal(
    after.instances.map((i) => i.name),
    ['i2'],
  );
  assert.equal(after.instances[0]!.topics.find((t) => t.topic === topic)!.partitions, [0, 1, 2, 3]);
});

test('with auto-commit off only commits move the group; commit and committed in every shape', async () => {
  const topic = topicName(syncA, 'refund');
  const events = await append(appenderA, 'refund', ids('re_', 5));
  const consumer = kafkaA.consumer();
  const group = { consumerGroupId: 'manual', instanceId: 'm1' };
  const committedOffset = async () => (await consumer.committed({ ...group, topicPartitions: [{ topic, partition: 0 }] }))[0]!.offset;

  const batch = await consumer.consume({ ...group, topics: [topic], autoCommit: false, autoOffsetReset: 'earliest', timeout: 1000 });
  assert.equal(
    keysOf(batch),
    events.map((e) => e.eventKey),
  );
  assert.equal(await consumer.consume({ ...group, topics: [topic], timeout: 200 }), [], 'the position moved on');
  assert.is(await committedOffset(), -1, 'nothing committed without a commit');

  await consumer.commit({ ...group, offset: { topic, partition: 0, offset: 3 } });
  assert.is(await committedOffset(), 3);
  await consumer.commit({ ...group, offset: [{ topic, partition: 0, offset: 4 }] });
  assert.is(await committedOffset(), 4);

  // Leaving without auto-commit commits nothing; the next instance starts at the committed offset.
  await kafkaA.admin().removeConsumerInstance('manual', 'm1');
  assert.is(await committedOffset(), 4);
  const again = await consumer.consume({ consumerGroupId: 'manual', instanceId: 'm2', topics: [topic], autoCommit: false, timeout: 1000 });
  assert.equal(offsetsOf(again), [4]);
  assert.equal(keysOf(again), [events[4]!.eventKey]);

  // A commit without offsets commits the instance's position: one past what it was handed.
  await consumer.commit({ consumerGroupId: 'manual', instanceId: 'm2' });
  assert.is(await committedOffset(), 5);
  assert.equal(await kafkaA.admin().committedOffsets({ ...group, topicPartition: { topic, partition: 0 } }), [{ topic, partition: 0, offset: 5 }]);

  const byTopics = await call('POST', '/committed/manual/m2', { auth: asA(), body: { topics: [topic] } });
  assert.equal(byTopics.body, [{ topic, partition: 0, offset: 5 }]);
  const byList = await call('POST', '/committed/manual/m2', { auth: asA(), body: { topicPartitions: [{ topic, partition: 0 }] } });
  assert.equal(byList.body, [{ topic, partition: 0, offset: 5 }]);
  const everything = await call('GET', '/committed/manual/m2', { auth: asA() });
  assert.equal(everything.body, [{ topic, partition: 0, offset: 5 }]);
  assert.equal((await call('POST', '/commit/manual/m2', { auth: asA() })).body, { result: 'Success', status: 200 });

  // Kafka-Auto-Offset-Reset: none refuses a partition the group never committed.
  const none = await call('POST', '/consume/never/n1', {
    auth: asA(),
    body: { topic, timeout: 0 },
    headers: { 'Kafka-Auto-Offset-Reset': 'none' },
  });
  assertError(none, 400, 'reset none without a committed offset');
  assert.match(none.body.error, /no committed offset/);
});

test("another account's credentials get nothing of a topic, and cannot tell it from one that does not exist", async () => {
  const topicOfA = topicName(syncA, 'customer');
  const missing = `svc.${newSyncId()}.customer`;
  const ownOfB = await append(appenderB, 'customer', ['cus_b']);
  const topicOfB = topicName(syncB, 'customer');
  const same = (x: Answer, y: Answer, what: string) => {
    assert.is(x.status, y.status, what);
    assert.is(x.text.replaceAll(topicOfA, 'T').replaceAll(missing, 'T'), y.text.replaceAll(topicOfA, 'T').replaceAll(missing, 'T'), what);
  };

  // fetch
  const foreignFetch = await call('POST', '/fetch', { auth: asB(), body: { topic: topicOfA, partition: 0, offset: 0, timeout: 0 } });
  const missingFetch = await call('POST', '/fetch', { auth: asB(), body: { topic: missing, partition: 0, offset: 0, timeout: 0 } });
  assertError(foreignFetch, 404, 'fetch of a foreign topic');
  same(foreignFetch, missingFetch, 'fetch: foreign and missing alike');
  assertError(await call('POST', '/fetch', { auth: asA(), body: { topic: topicOfB, partition: 0, offset: 0 } }), 404, 'A fetching B');
  // B's own topic works for B.
  const own = await kafkaB.consumer().fetch({ topic: topicOfB, partition: 0, offset: 0, timeout: 0 });
  assert.equal(keysOf(own), [ownOfB[0]!.eventKey]);

  // consume: refused alike, even in a group with the name A uses, and nothing of it is stored
  const consumerB = kafkaB.consumer();
  const foreignConsume = await call('POST', '/consume/billing/b1', { auth: asB(), body: { topics: [topicOfA], timeout: 300 } });
  const missingConsume = await call('POST', '/consume/billing/b1', { auth: asB(), body: { topics: [missing], timeout: 300 } });
  assertError(foreignConsume, 404, 'consume of a foreign topic');
  same(foreignConsume, missingConsume, 'consume: foreign and missing alike');
  const viaPath = await call('GET', `/consume/billing/b1/${encodeURIComponent(topicOfA)}?timeout=300`, { auth: asB() });
  assertError(viaPath, 404, 'consume of a foreign topic by path');

  // committed: -1 alike; nothing listed for B's group of the same name
  const committedForeign = await consumerB.committed({ consumerGroupId: 'billing', instanceId: 'b1', topicPartitions: [{ topic: topicOfA, partition: 0 }] });
  const committedMissing = await consumerB.committed({ consumerGroupId: 'billing', instanceId: 'b1', topicPartitions: [{ topic: missing, partition: 0 }] });
  assert.equal(committedForeign, [{ topic: topicOfA, partition: 0, offset: -1 }]);
  assert.equal(committedMissing, [{ topic: missing, partition: 0, offset: -1 }]);
  assert.equal((await call('GET', '/committed/billing/b1', { auth: asB() })).body, []);
  assert.equal((await call('POST', '/committed/billing/b1', { auth: asB(), body: { topics: [topicOfA] } })).body, []);
  // A's group of that name is untouched.
  const aCommitted = await kafkaA
    .consumer()
    .committed({ consumerGroupId: 'billing', instanceId: 'i2', topicPartitions: [{ topic: topicName(syncA, 'order'), partition: 0 }] });
  assert.is(aCommitted[0]!.offset, 7);

  // commit and offsets refuse a foreign topic exactly as a missing one
  const commitForeign = await call('POST', '/commit/billing/b1', { auth: asB(), body: { topic: topicOfA, partition: 0, offset: 1 } });
  const commitMissing = await call('POST', '/commit/billing/b1', { auth: asB(), body: { topic: missing, partition: 0, offset: 1 } });
  assertError(commitForeign, 404, 'commit on a foreign topic');
  same(commitForeign, commitMissing, 'commit: foreign and missing alike');
  const offsetsForeign = await call('POST', '/offsets/latest', { auth: asB(), body: [{ topic: topicOfA, partition: 0 }] });
  const offsetsMissing = await call('POST', '/offsets/latest', { auth: asB(), body: [{ topic: missing, partition: 0 }] });
  assertError(offsetsForeign, 404, 'offsets of a foreign topic');
  same(offsetsForeign, offsetsMissing, 'offsets: foreign and missing alike');

  // listings show only B's own
  assert.equal(await kafkaB.admin().topics(), { [topicOfB]: 1 });
  const topicsOfA = await kafkaA.admin().topics();
  assert.ok(topicOfA in topicsOfA && !(topicOfB in topicsOfA));
  assert.equal(await kafkaB.admin().consumers(), [], 'B has no instance: its consumes were refused');
});

test('offsets by earliest, latest and timestamp', async () => {
  const topic = topicName(syncA, 'refund');
  const before = Date.now();
  await new Promise((r) => setTimeout(r, 5));
  await append(appenderA, 'refund', ['re_late']);
  const admin = kafkaA.admin();
  assert.equal(await admin.topicPartitionOffsets({ timestamp: 'earliest', topicPartition: { topic, partition: 0 } }), [{ topic, partition: 0, offset: 0 }]);
  assert.equal(await admin.topicPartitionOffsets({ timestamp: 'latest', topicPartitions: [{ topic, partition: 0 }] }), [{ topic, partition: 0, offset: 6 }]);
  assert.equal(await admin.topicPartitionOffsets({ timestamp: before, topicPartition: { topic, partition: 0 } }), [{ topic, partition: 0, offset: 5 }]);
  assert.equal(await admin.topicPartitionOffsets({ timestamp: Date.now() + 60_000, topicPartition: { topic, partition: 0 } }), [
    { topic, partition: 0, offset: -1 },
  ]);
});

test('bad credentials are a 401 with the error shape, the same whatever was wrong', async () => {
  const body = { topic: topicName(syncA, 'customer'), partition: 0, offset: 0, timeout: 0 };
  const none = await call('POST', '/fetch', { body });
  assertError(none, 401, 'no credentials');
  assert.match(String(none.headers['www-authenticate']), /^Basic /);
  const wrongPassword = await call('POST', '/fetch', { body, auth: basic({ username: A.username, password: 'not-it' }) });
  const unknownUser = await call('POST', '/fetch', { body, auth: basic({ username: 'ev_nobody', password: A.password }) });
  const crossed = await call('POST', '/fetch', { body, auth: basic({ username: A.username, password: B.password }) });
  for (const [answer, what] of [
    [wrongPassword, 'wrong password'],
    [unknownUser, 'unknown user'],
    [crossed, "another account's password"],
  ] as const) {
    assertError(answer, 401, what);
    assert.is(answer.body.error, wrongPassword.body.error, `${what}: one message for every failure`);
  }
  assertError(await call('POST', '/fetch', { body, auth: 'Basic !!!' }), 401, 'garbage basic');
  assertError(await call('POST', '/fetch', { body, auth: `Basic ${Buffer.from('no-colon').toString('base64')}` }), 401, 'no colon');
  assertError(await call('POST', '/fetch', { body, auth: 'Bearer trb_x' }), 401, 'bearer');
  assertError(await call('GET', '/topics', { auth: basic({ username: 'x'.repeat(5000), password: 'y' }) }), 401, 'huge username');
});

test('bad input answers a clear 4xx with the error shape, and the server keeps serving', async () => {
  const topic = topicName(syncA, 'customer');
  const auth = asA();
  const cases: Array<[string, string, Parameters<typeof call>[2], number]> = [
    ['truncated JSON', '/fetch', { raw: '{"topic": ' }, 400],
    ['a JSON array', '/fetch', { body: [1, 2] }, 400],
    ['a JSON string', '/fetch', { body: 'fetch' }, 400],
    ['no body', '/fetch', {}, 400],
    ['no topic', '/fetch', { body: { partition: 0, offset: 0 } }, 400],
    ['no offset', '/fetch', { body: { topic, partition: 0 } }, 400],
    ['partition as a string', '/fetch', { body: { topic, partition: '0', offset: 0 } }, 400],
    ['fractional partition', '/fetch', { body: { topic, partition: 0.5, offset: 0 } }, 400],
    ['negative offset', '/fetch', { body: { topic, partition: 0, offset: -1 } }, 400],
    ['negative timeout', '/fetch', { body: { topic, partition: 0, offset: 0, timeout: -5 } }, 400],
    ['timeout as text', '/fetch', { body: { topic, partition: 0, offset: 0, timeout: 'soon' } }, 400],
    ['topicPartitionOffsets not a list', '/fetch', { body: { topicPartitionOffsets: { topic } } }, 400],
    ['a bad entry in topicPartitionOffsets', '/fetch', { body: { topicPartitionOffsets: [{ topic, partition: 0, offset: -3 }] } }, 400],
    ['an empty topic name', '/fetch', { body: { topic: '', partition: 0, offset: 0 } }, 400],
    ['a partition out of range', '/fetch', { body: { topic, partition: 7, offset: 0 } }, 404],
    ['consume without a topic', '/consume/g/i', { body: { timeout: 0 } }, 400],
    ['consume with topics not a list', '/consume/g/i', { body: { topics: 'x' } }, 400],
    ['consume with a bad auto-commit header', '/consume/g/i', { body: { topic }, headers: { 'Kafka-Enable-Auto-Commit': 'maybe' } }, 400],
    ['consume with a bad reset header', '/consume/g/i', { body: { topic }, headers: { 'Kafka-Auto-Offset-Reset': 'sometimes' } }, 400],
    ['consume with a bad session header', '/consume/g/i', { body: { topic }, headers: { 'Kafka-Session-Timeout-Ms': '-1' } }, 400],
    ['consume with a bad query timeout', `/consume/g/i/${topic}?timeout=abc`, {}, 400],
    ['a group name too long', `/consume/${'g'.repeat(300)}/i`, { body: { topic } }, 400],
    ['bad percent-encoding', '/consume/%E0%A4%A/i', { body: { topic } }, 400],
    ['commit with a negative offset', '/commit/g/i', { body: { topic, partition: 0, offset: -1 } }, 400],
    ['commit with a string body', '/commit/g/i', { body: 'all' }, 400],
    ['commit with a list holding junk', '/commit/g/i', { body: [{ topic, partition: 0, offset: 1 }, 7] }, 400],
    ['committed with a number body', '/committed/g/i', { body: 5 }, 400],
    ['committed with a bad topics list', '/committed/g/i', { body: { topics: [1] } }, 400],
    ['offsets with no body', '/offsets/latest', {}, 400],
    ['offsets at a bad timestamp', '/offsets/yesterday', { body: { topic, partition: 0 } }, 400],
    // The odd forms of a time: only whole milliseconds since the epoch are one.
    ...(['', '-1', '1.5', '1e3', '0x10', ' 1', '9'.repeat(16), '2026-12-01T22:00:00%2B24:00', '2016-12-31T23:59:60Z', '%2B99:99'].map((at) => [
      `offsets at the timestamp "${decodeURIComponent(at)}"`,
      `/offsets/${at}`,
      { body: [{ topic, partition: 0 }] },
      at === '' ? 404 : 400,
    ]) as Array<[string, string, Parameters<typeof call>[2], number]>),
    ['removing an instance that does not exist', '/delete-consumer/g/nobody', {}, 404],
    ['an unknown path', '/produce/x/y', {}, 404],
    ['the root', '/', {}, 404],
  ];
  for (const [what, path, options, status] of cases) {
    assertError(await call('POST', path, { auth, ...options }), status, what);
  }
  // The two ends of what the path takes are answers: the first event kept (none: -1), and none that late.
  const offsetAt = async (at: string) => {
    const answer = await call('POST', `/offsets/${at}`, { auth, body: [{ topic, partition: 0 }] });
    assert.is(answer.status, 200, `offsets at ${at}: ${answer.text}`);
    return answer.body[0].offset as number;
  };
  const [earliest, latest] = [await offsetAt('earliest'), await offsetAt('latest')];
  assert.is(await offsetAt('0'), earliest < latest ? earliest : -1, 'offsets since 1970');
  assert.is(await offsetAt('9'.repeat(15)), -1, 'offsets from the year 33658');

  // Messages name the field.
  const negative = await call('POST', '/fetch', { auth, body: { topic, partition: 0, offset: -1 } });
  assert.is(negative.body.error, 'offset must not be negative');
  const nested = await call('POST', '/fetch', {
    auth,
    body: {
      topicPartitionOffsets: [
        { topic, partition: 0, offset: 0 },
        { topic, partition: 'x', offset: 0 },
      ],
    },
  });
  assert.is(nested.body.error, 'topicPartitionOffsets[1].partition must be an integer');
  const header = await call('POST', '/consume/g/i', { auth, body: { topic }, headers: { 'Kafka-Auto-Offset-Reset': 'sometimes' } });
  assert.match(header.body.error, /Kafka-Auto-Offset-Reset/);

  const put = await call('PUT', '/fetch', { auth, body: { topic, partition: 0, offset: 0 } });
  assertError(put, 405, 'PUT /fetch');
  assert.is(put.headers.allow, 'GET, POST');
  assertError(await call('GET', '/delete-consumer/g/i', { auth }), 405, 'GET /delete-consumer');
  assertError(await call('POST', '/topics', { auth }), 405, 'POST /topics');

  const big = JSON.stringify({ topic, partition: 0, offset: 0, padding: 'x'.repeat(100 * 1024) });
  assertError(await call('POST', '/fetch', { auth, raw: big }), 413, 'a declared body over the limit');
  assertError(await call('POST', '/fetch', { auth, raw: big, chunked: true }), 413, 'a chunked body over the limit');

  // Still serving, with nothing logged as an internal error.
  const ok = await call('POST', '/fetch', { auth, body: { topic, partition: 0, offset: 0, timeout: 0 } });
  assert.is(ok.status, 200);
  assert.ok(ok.body.length >= 5);
  assert.equal(
    logLines.filter((line) => /"level":(50|60)/.test(line)),
    [],
    'no request failed with an internal error',
  );
});

test('a client that goes away during a long poll loses nothing, and nothing breaks', async () => {
  const topic = topicName(syncA, 'payout');
  const [seed] = await append(appenderA, 'payout', ['po_seed']);
  const consumer = kafkaA.consumer();
  const group = { consumerGroupId: 'gone', instanceId: 'g1', topics: [topic] };
  assert.equal(keysOf(await consumer.consume({ ...group, autoOffsetReset: 'earliest', timeout: 0 })), [seed!.eventKey]);

  const abandoned = http.request(`${base}/consume/gone/g1`, { method: 'POST', headers: { authorization: asA() } });
  abandoned.on('error', () => undefined);
  abandoned.end(JSON.stringify({ topic, timeout: 10_000 }));
  await new Promise((r) => setTimeout(r, 300));
  abandoned.destroy();
  await new Promise((r) => setTimeout(r, 100));

  const events = await append(appenderA, 'payout', ['po_1', 'po_2']);
  const next = await consumer.consume({ ...group, timeout: 1000 });
  assert.equal(
    keysOf(next),
    events.map((e) => e.eventKey),
  );
  assert.equal(offsetsOf(next), [1, 2]);
});

test('huge timeouts are cut to the cap', async () => {
  const capped = createEventsRestHandler({ pool, accounts, reader: new EventLogReader(pool), bus, logger, limits: { maxTimeoutMs: 800 } });
  const cappedServer = await listen(capped, { host: '127.0.0.1', port: 0 });
  try {
    const topic = topicName(syncA, 'customer');
    const { value, ms } = await timed(
      call('POST', '/fetch', {
        base: `http://127.0.0.1:${cappedServer.port}`,
        auth: asA(),
        body: { topic, partition: 0, offset: 1_000_000, timeout: 1e12 },
      }),
    );
    assert.is(value.status, 200, value.text);
    assert.equal(value.body, []);
    assert.ok(ms >= 700 && ms < 3000, `answered after ${ms} ms`);
  } finally {
    await capped.close();
    await cappedServer.close();
  }
});

test('close() ends waiting long polls at once with an empty answer', async () => {
  const closing = createEventsRestHandler({ pool, accounts, reader: new EventLogReader(pool), bus, logger });
  const closingServer = await listen(closing, { host: '127.0.0.1', port: 0 });
  const topic = topicName(syncA, 'customer');
  const waiting = timed(
    call('POST', '/fetch', { base: `http://127.0.0.1:${closingServer.port}`, auth: asA(), body: { topic, partition: 0, offset: 1_000_000, timeout: 20_000 } }),
  );
  await new Promise((r) => setTimeout(r, 200));
  await closing.close();
  const { value, ms } = await waiting;
  assert.is(value.status, 200);
  assert.equal(value.body, []);
  assert.ok(ms < 2000, `answered after ${ms} ms`);
  const refused = await call('POST', '/fetch', { base: `http://127.0.0.1:${closingServer.port}`, auth: asA(), body: { topic, partition: 0, offset: 0 } });
  assertError(refused, 503, 'after close');
  await closingServer.close();
});

test.run();
