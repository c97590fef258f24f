/**
 * The Kafka relay and account access against a real broker (test/harness/kafka) and a real
 * control database: what reaches Kafka is exactly the event log (key, value, svc-event-id,
 * partition, order), survives a broker restart and a relay restart, and each account's
 * SCRAM credentials read only that account's topics.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Connection, findCoordinatorV4 } from '@platformatic/kafka';
import kafkajs, { type Consumer, type IHeaders, type Kafka } from 'kafkajs';
import pg from 'pg';
import { AccountStore, type NewAccount } from '../src/control/accounts.ts';
import { SecretBox } from '../src/control/secrets.ts';
import { migrateControlDatabase } from '../src/db/migrate.ts';
import { EventAppender, type NewEvent } from '../src/events/append.ts';
import { EventBus } from '../src/events/bus.ts';
import { EventLogReader, topicName, type LoggedEvent } from '../src/events/log.ts';
import { KafkaAccess, accountGroupPrefix } from '../src/events/kafka/access.ts';
import { accountGrants } from '../src/events/kafka/grants.ts';
import { loadRelayCursor } from '../src/events/kafka/cursor.ts';
import { createKafkaPublisher, kafkaErrorTypes, type KafkaPublisher } from '../src/events/kafka/publisher.ts';
import { EVENT_ID_HEADER, startKafkaRelay, type KafkaRelay } from '../src/events/kafka/relay.ts';
import { kafkaRelayRunner } from '../src/events/kafka/runner.ts';
import { newSyncId } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import { sharedKafka, type KafkaBroker } from './harness/kafka/index.ts';
import { freshDatabase } from './harness/postgres.ts';

const { Kafka: KafkaClient, logLevel } = kafkajs;
const logger = createLogger({ level: process.env.TRIBUTARY_LOG_LEVEL ?? 'warn' });

interface Context {
  broker: KafkaBroker;
  pool: pg.Pool;
  bus: EventBus;
  reader: EventLogReader;
  publisher: KafkaPublisher;
  accounts: AccountStore;
  accountA: NewAccount;
  accountB: NewAccount;
  relays: KafkaRelay[];
}

const Relay = suite<Context>('kafka relay');
const Access = suite<Context>('kafka access');

async function setUp(context: Context): Promise<void> {
  context.broker = await sharedKafka();
  const url = await freshDatabase('kafka');
  await migrateControlDatabase(url, logger);
  context.pool = new pg.Pool({ connectionString: url, max: 8 });
  context.bus = new EventBus({ url, logger });
  await context.bus.start();
  context.reader = new EventLogReader(context.pool);
  context.publisher = createKafkaPublisher({ brokers: context.broker.brokers, logger });
  context.accounts = new AccountStore(context.pool, SecretBox.fromBase64(randomBytes(32).toString('base64')));
  context.accountA = await context.accounts.create('Account A');
  context.accountB = await context.accounts.create('Account B');
  context.relays = [];
}

async function tearDown(context: Context): Promise<void> {
  await Promise.all(context.relays.map((r) => r.stop()));
  await context.publisher.close();
  await context.bus.stop();
  await context.pool.end();
}

Relay.before(setUp);
Relay.after(tearDown);
Access.before(setUp);
Access.after(tearDown);

// ---------------------------------------------------------------------------------------------
// Helpers: events in, messages out.

let lsnCounter = 0x1000;
const nextLsn = () => `0/${(lsnCounter += 0x10).toString(16).toUpperCase()}`;

/** A decoder-shaped event; `n` makes each value unique, so a wrong message cannot pass for another. */
function event(collection: string, recordId: string, n: number): NewEvent {
  const createdAt = new Date();
  const kind = n === 0 ? 'inserted' : 'updated';
  const body: Record<string, unknown> = {
    collection,
    created_at: createdAt.toISOString(),
    data: { id: recordId, version: n, note: `${recordId} v${n} ✓` },
    event: kind,
    id: recordId,
    table_db_name: collection,
  };
  if (kind === 'updated') body.changes = { version: n - 1 };
  return { collection, recordId, eventKey: `${nextLsn()}:${randomUUID().slice(0, 8)}:${n}`, createdAt, value: JSON.stringify(body) };
}

interface Received {
  topic: string;
  partition: number;
  offset: string;
  key: string | undefined;
  value: string | undefined;
  eventId: string | undefined;
  at: number;
}

function header(headers: IHeaders | undefined, name: string): string | undefined {
  const value = headers?.[name];
  if (value === undefined) return undefined;
  return String(Array.isArray(value) ? value[0] : value);
}

/** A consumer on `topics` from the beginning that records every message as it arrives. */
async function collect(kafka: Kafka, topics: string[], groupId = `test-${randomUUID().slice(0, 8)}`) {
  const consumer: Consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
  const received: Received[] = [];
  await consumer.connect();
  await consumer.subscribe({ topics, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      received.push({
        topic,
        partition,
        offset: message.offset,
        key: message.key?.toString(),
        value: message.value?.toString(),
        eventId: header(message.headers, EVENT_ID_HEADER),
        at: Date.now(),
      });
    },
  });
  return {
    received,
    async until(count: number, timeoutMs = 60_000): Promise<Received[]> {
      await eventually(`${count} messages on ${topics.join(', ')}`, timeoutMs, async () => {
        assert.ok(received.length >= count, `${received.length} of ${count} messages`);
      });
      return received;
    },
    stop: () => consumer.disconnect(),
  };
}

async function eventually(what: string, timeoutMs: number, check: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${(error as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function relayedEverything(context: Context, relay: KafkaRelay, syncId: string, timeoutMs = 60_000): Promise<string> {
  const last = await context.reader.lastSeq(syncId);
  await eventually(`relay of ${syncId} to reach seq ${last}`, timeoutMs, async () => {
    assert.is(relay.relayedSeq(), last);
  });
  return last;
}

function plainKafka(context: Context, clientId = 'kafka-test'): Kafka {
  return new KafkaClient({ clientId, brokers: context.broker.brokers, logLevel: logLevel.NOTHING });
}

function start(context: Context, syncId: string, onRelayed?: (events: LoggedEvent[]) => void): KafkaRelay {
  const relay = startKafkaRelay({
    ...(onRelayed ? { onRelayed } : {}),
    pool: context.pool,
    syncId,
    reader: context.reader,
    bus: context.bus,
    kafka: context.publisher,
    logger,
    retry: { initialMs: 50, maxMs: 1_000 },
  });
  context.relays.push(relay);
  return relay;
}

const byEventKey = (events: LoggedEvent[]) => new Map(events.map((e) => [e.eventKey, e]));

// ---------------------------------------------------------------------------------------------

Relay('every event reaches Kafka with its key, value, svc-event-id, partition and offset, in order', async (context) => {
  const syncId = newSyncId();
  const appender = new EventAppender({ pool: context.pool, syncId, accountId: context.accountA.account.id, partitions: 3 });
  await appender.load();
  const records = ['rec_a', 'rec_b', 'rec_c', 'rec_d', 'rec_e', 'rec_f'];
  // Logged before the relay starts: the relay must pick them up from its (empty) cursor.
  await appender.append(
    records.map((r) => event('customer', r, 0)),
    nextLsn(),
  );
  const relay = start(context, syncId);
  for (let n = 1; n <= 4; n++) {
    await appender.append([...records.map((r) => event('customer', r, n)), event('invoice', `inv_${n}`, 0)], nextLsn());
  }
  const last = await relayedEverything(context, relay, syncId);
  assert.is(last, '34');
  assert.is(await loadRelayCursor(context.pool, syncId), '34', 'the cursor is durable');

  const logged = await context.reader.bySeq(syncId, '0', { limit: 100 });
  const topics = [topicName(syncId, 'customer'), topicName(syncId, 'invoice')];
  const admin = plainKafka(context).admin();
  await admin.connect();
  try {
    const metadata = await admin.fetchTopicMetadata({ topics });
    assert.equal(
      metadata.topics.map((t) => [t.name, t.partitions.length]).sort(),
      [
        [topics[0], 3],
        [topics[1], 3],
      ],
      'topics created with the log partition count',
    );
  } finally {
    await admin.disconnect();
  }

  const consumer = await collect(plainKafka(context), topics);
  const received = await consumer.until(logged.length);
  await new Promise((r) => setTimeout(r, 300)); // anything extra (a duplicate) would show up now
  await consumer.stop();
  assert.is(received.length, logged.length, 'no duplicates on a clean run');

  // Per (topic, partition): exactly the log's events, in the log's order, at the log's offsets.
  const shape = (e: { topic: string; partition: number; offset: string; key?: string; value?: string; eventId?: string }) => ({
    topic: e.topic,
    partition: e.partition,
    offset: e.offset,
    key: e.key,
    value: e.value,
    eventId: e.eventId,
  });
  const partitionKey = (e: { topic: string; partition: number }) => `${e.topic}/${e.partition}`;
  const expected = new Map<string, unknown[]>();
  for (const e of logged) {
    const list = expected.get(partitionKey(e)) ?? [];
    list.push(shape({ ...e, key: e.recordId, eventId: e.eventKey }));
    expected.set(partitionKey(e), list);
  }
  const actual = new Map<string, unknown[]>();
  for (const m of received) {
    const list = actual.get(partitionKey(m)) ?? [];
    list.push(shape(m));
    actual.set(partitionKey(m), list);
  }
  assert.equal([...actual.keys()].sort(), [...expected.keys()].sort());
  for (const [key, list] of expected) assert.equal(actual.get(key), list, `partition ${key}`);
  // The records really are spread over partitions, so the check above is about more than one.
  assert.ok(new Set(logged.filter((e) => e.topic === topics[0]).map((e) => e.partition)).size > 1);
  // Per record: versions 0..4 in order.
  for (const record of records) {
    const versions = received.filter((m) => m.key === record).map((m) => (JSON.parse(m.value!) as { data: { version: number } }).data.version);
    assert.equal(versions, [0, 1, 2, 3, 4], `order of ${record}`);
  }
});

Relay('a relay restart resumes from its cursor: nothing resent, nothing skipped', async (context) => {
  const syncId = newSyncId();
  const appender = new EventAppender({ pool: context.pool, syncId, accountId: context.accountA.account.id });
  await appender.load();
  // The first relay as main.ts runs it: a leased runner beside the sync's decoder.
  const runner = await kafkaRelayRunner({ pool: context.pool, reader: context.reader, bus: context.bus, kafka: context.publisher, logger })(syncId);
  runner.start();
  await appender.append(
    Array.from({ length: 10 }, (_, i) => event('charge', `ch_${i}`, 0)),
    nextLsn(),
  );
  await eventually('the first relay to record seq 10', 60_000, async () => assert.is(await loadRelayCursor(context.pool, syncId), '10'));
  await runner.stop();

  // Logged while no relay runs: the cursor stays where the broker acknowledged.
  await appender.append(
    Array.from({ length: 10 }, (_, i) => event('charge', `ch_${i}`, 1)),
    nextLsn(),
  );
  assert.is(await loadRelayCursor(context.pool, syncId), '10');

  const second = start(context, syncId);
  assert.is(await relayedEverything(context, second, syncId), '20');
  assert.is(await loadRelayCursor(context.pool, syncId), '20');

  const topic = topicName(syncId, 'charge');
  const admin = plainKafka(context).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    assert.equal(
      offsets.map((o) => [o.partition, o.low, o.high]),
      [[0, '0', '20']],
      'exactly 20 messages: the second relay did not start over',
    );
  } finally {
    await admin.disconnect();
  }
  const logged = await context.reader.bySeq(syncId, '0');
  const consumer = await collect(plainKafka(context), [topic]);
  const received = await consumer.until(20);
  await consumer.stop();
  assert.equal(
    received.map((m) => [m.offset, m.key, m.value, m.eventId]),
    logged.map((e) => [e.offset, e.recordId, e.value, e.eventKey]),
  );
});

Relay('a broker restart in the middle of a stream loses nothing and keeps per-record order', async (context) => {
  const syncId = newSyncId();
  const appender = new EventAppender({ pool: context.pool, syncId, accountId: context.accountA.account.id, partitions: 2 });
  await appender.load();
  const relay = start(context, syncId);
  const records = Array.from({ length: 8 }, (_, i) => `sub_${i}`);
  let version = 0;
  let writing = true;
  const writer = (async () => {
    while (writing) {
      await appender.append(
        records.map((r) => event('subscription', r, version)),
        nextLsn(),
      );
      version += 1;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  await eventually('the relay to be under way', 30_000, async () => assert.ok(BigInt(relay.relayedSeq()) >= 80n));
  const beforeRestart = relay.relayedSeq();
  await context.broker.restart();
  const restartedAt = await context.reader.lastSeq(syncId);
  await new Promise((r) => setTimeout(r, 1_500));
  writing = false;
  await writer;
  const last = await relayedEverything(context, relay, syncId, 120_000);
  assert.ok(BigInt(last) > BigInt(restartedAt), 'events were logged after the restart too');
  assert.ok(BigInt(restartedAt) > BigInt(beforeRestart), 'events were logged while the broker was down');

  const logged = await context.reader.bySeq(syncId, '0', { limit: 100_000 });
  assert.is(String(logged.length), last);
  const log = byEventKey(logged);
  const consumer = await collect(plainKafka(context), [topicName(syncId, 'subscription')]);
  const received = await consumer.until(logged.length, 60_000);
  await new Promise((r) => setTimeout(r, 500));
  await consumer.stop();

  // Every message is a logged event, byte for byte, on its log partition (a duplicate carries
  // the same svc-event-id, key and value as the original).
  for (const m of received) {
    const original = log.get(m.eventId ?? '');
    assert.ok(original, `message at ${m.partition}/${m.offset} has a known svc-event-id`);
    assert.is(m.key, original.recordId);
    assert.is(m.value, original.value);
    assert.is(m.partition, original.partition);
  }
  // Nothing lost.
  const seen = new Set(received.map((m) => m.eventId));
  assert.equal(
    logged.filter((e) => !seen.has(e.eventKey)).map((e) => e.seq),
    [],
    'every logged event reached Kafka',
  );
  // Per record: the first delivery of each version comes in order 0, 1, 2, …; a resend only
  // repeats a run of versions already seen, never brings an older one after a newer first delivery.
  for (const record of records) {
    const versions = received.filter((m) => m.key === record).map((m) => (JSON.parse(m.value!) as { data: { version: number } }).data.version);
    const firsts: number[] = [];
    const firstSeen = new Set<number>();
    for (const v of versions) {
      if (!firstSeen.has(v)) {
        firstSeen.add(v);
        firsts.push(v);
      }
    }
    assert.equal(
      firsts,
      Array.from({ length: version }, (_, i) => i),
      `first deliveries of ${record} in order`,
    );
  }
  const duplicates = received.length - logged.length;
  logger.info({ events: logged.length, duplicates }, 'broker restart: delivered');
});

Relay('a stream of 2,000 events/s: every event acknowledged and consumed, in order per record (latency printed)', async (context) => {
  const syncId = newSyncId();
  const appender = new EventAppender({ pool: context.pool, syncId, accountId: context.accountA.account.id });
  await appender.load();
  const relayedAt = new Map<string, number>();
  const relay = start(context, syncId, (events) => {
    const now = Date.now();
    for (const e of events) relayedAt.set(e.eventKey, now);
  });
  // The topic exists before the measured stream starts (its creation is a one-off).
  await appender.append([event('payout', 'po_warmup', 0)], nextLsn());
  await relayedEverything(context, relay, syncId);
  const consumer = await collect(plainKafka(context), [topicName(syncId, 'payout')]);
  await consumer.until(1);

  const committedAt = new Map<string, number>();
  const seconds = 3;
  const perSecond = 2_000;
  const startedAt = Date.now();
  // Every 10 ms, whatever is due by then (20 events on time; more if an append was slow).
  for (let tick = 1, sent = 0; sent < seconds * perSecond; tick++) {
    const due = Math.min(seconds * perSecond, Math.floor(((Date.now() - startedAt) * perSecond) / 1000)) - sent;
    if (due > 0) {
      const batch = Array.from({ length: due }, (_, i) => event('payout', `po_${(sent + i) % 200}`, tick));
      await appender.append(batch, nextLsn());
      const now = Date.now();
      for (const e of batch) committedAt.set(e.eventKey, now);
      sent += due;
    }
    const wait = startedAt + tick * 10 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const rate = committedAt.size / ((Date.now() - startedAt) / 1000);
  await consumer.until(committedAt.size + 1);
  await consumer.stop();

  const percentile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const figures = (latencies: number[]) => {
    const sorted = [...latencies].sort((x, y) => x - y);
    return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted[sorted.length - 1]! };
  };
  // Commit (append resolved) → Kafka acknowledged and cursor recorded, per event.
  const acked = figures([...committedAt].map(([key, at]) => relayedAt.get(key)! - at));
  // Commit → a consumer has it: adds the consumer's own fetch round trip.
  const consumed = consumer.received.filter((m) => committedAt.has(m.eventId ?? '')).map((m) => m.at - committedAt.get(m.eventId!)!);
  assert.is(consumed.length, committedAt.size);
  const atConsumer = figures(consumed);
  process.stdout.write(
    `Kafka relay at ${Math.round(rate)} events/s, latency in ms: commit→acked p50 ${acked.p50} p99 ${acked.p99} max ${acked.max}; ` +
      `commit→consumer p50 ${atConsumer.p50} p99 ${atConsumer.p99} max ${atConsumer.max}\n`,
  );
  // The figures are printed, not asserted: how fast depends on what else the machine runs
  // (a run six files at a time wrote only 1,732 a second). bench/events-latency.ts measures them
  // against a bare kafkajs round trip (docs/performance.md). Asserted: all of it, acknowledged,
  // in order per record.
  assert.is(committedAt.size, seconds * perSecond, 'every event of the stream was committed');
  assert.equal(
    [...committedAt.keys()].filter((key) => !relayedAt.has(key)),
    [],
    'every committed event was acknowledged by Kafka',
  );
  const commitOrder = new Map([...committedAt.keys()].map((key, index) => [key, index]));
  const lastOfRecord = new Map<string, number>();
  const overtaken: string[] = [];
  for (const m of consumer.received) {
    const index = commitOrder.get(m.eventId ?? '');
    if (index === undefined) continue;
    if (index < (lastOfRecord.get(m.key ?? '') ?? -1)) overtaken.push(m.eventId!);
    lastOfRecord.set(m.key ?? '', index);
  }
  assert.equal(overtaken, [], 'each record’s events reach the consumer in commit order');
});

// ---------------------------------------------------------------------------------------------

async function asUser(context: Context, account: NewAccount) {
  return new KafkaClient({
    clientId: `test-${account.account.eventsUsername}`,
    brokers: context.broker.saslBrokers,
    sasl: { mechanism: 'scram-sha-256', username: account.account.eventsUsername, password: account.eventsPassword.reveal() },
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  });
}

/** Metadata for `topic` as the user sees it: 'ok' or the broker's error type. */
async function describeAs(kafka: Kafka, topic: string): Promise<string> {
  const admin = kafka.admin();
  try {
    await admin.connect();
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    return metadata.topics[0]?.partitions.length ? 'ok' : 'no partitions';
  } catch (error) {
    return kafkaErrorTypes(error)[0] ?? (error as Error).name;
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Reads `topic` as the user with `groupId`: the messages, or the error that stopped it. */
async function consumeAs(kafka: Kafka, topic: string, groupId: string, count: number): Promise<Received[] | string> {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, retry: { retries: 0 } });
  const received: Received[] = [];
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const crashed = new Promise<string>((resolve) => {
      consumer.on(consumer.events.CRASH, ({ payload }) => resolve(kafkaErrorTypes(payload.error)[0] ?? payload.error.name));
    });
    await consumer.run({
      eachMessage: async ({ topic: t, partition, message }) => {
        received.push({
          topic: t,
          partition,
          offset: message.offset,
          key: message.key?.toString(),
          value: message.value?.toString(),
          eventId: header(message.headers, EVENT_ID_HEADER),
          at: Date.now(),
        });
      },
    });
    const done = (async () => {
      const deadline = Date.now() + 30_000;
      while (received.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      return received.length >= count ? 'done' : `only ${received.length} of ${count}`;
    })();
    const outcome = await Promise.race([done, crashed]);
    return outcome === 'done' ? received : outcome;
  } catch (error) {
    return kafkaErrorTypes(error)[0] ?? (error as Error).name;
  } finally {
    await consumer.disconnect().catch(() => undefined);
  }
}

async function insertSync(context: Context, syncId: string, account: NewAccount, state: 'active' | 'deleting'): Promise<void> {
  await context.pool.query(
    `INSERT INTO syncs (id, account_id, kind, upstream_account_id, api_key_enc, settings, state, database_name, database_role, database_password_enc)
     VALUES ($1, $2, 'stripe', 'acct_test', 'sealed', '{}', $3, $4, 'reader', 'sealed')`,
    [syncId, account.account.id, state, `tr_${syncId}`],
  );
}

/** FindCoordinator for a consumer group as the account's user: 'ok' or the broker's error. */
async function findCoordinatorAs(context: Context, account: NewAccount, groupId: string): Promise<string> {
  const [host, port] = context.broker.saslBrokers[0]!.split(':');
  const connection = new Connection('test-coordinator', {
    sasl: { mechanism: 'SCRAM-SHA-256', username: account.account.eventsUsername, password: account.eventsPassword.reveal() },
  });
  connection.on('error', () => undefined);
  try {
    await connection.connect(host!, Number(port));
    const response = await findCoordinatorV4.api.async(connection, 0, [groupId]);
    return response.coordinators[0]?.errorCode === 0 ? 'ok' : `error ${response.coordinators[0]?.errorCode}`;
  } catch (error) {
    const errors = (error as { errors?: { apiId?: string }[] }).errors ?? [];
    return errors[0]?.apiId ?? (error as Error).message;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

Access("an account's SCRAM user reads its own topics and is refused on another account's", async (context) => {
  const { accountA: a, accountB: b } = context;
  const syncA = newSyncId();
  const syncB = newSyncId();
  for (const [account, syncId] of [
    [a, syncA],
    [b, syncB],
  ] as const) {
    const appender = new EventAppender({ pool: context.pool, syncId, accountId: account.account.id });
    await appender.load();
    await appender.append([event('customer', 'cus_1', 0), event('customer', 'cus_1', 1), event('customer', 'cus_2', 0)], nextLsn());
    await relayedEverything(context, start(context, syncId), syncId);
  }
  const topicA = topicName(syncA, 'customer');
  const topicB = topicName(syncB, 'customer');

  const access = new KafkaAccess({ brokers: context.broker.brokers, logger });
  try {
    // The password as the account store keeps it (sealed), as main.ts would hand it over.
    for (const account of [a, b]) {
      const password = await context.accounts.eventsPassword(account.account.id);
      assert.ok(password);
      await access.ensureAccount({ username: account.account.eventsUsername, password });
      await access.ensureAccount({ username: account.account.eventsUsername, password }); // idempotent
    }
    await access.grantSync(a.account.eventsUsername, syncA);
    await access.grantSync(b.account.eventsUsername, syncB);
    await access.grantSync(a.account.eventsUsername, syncA); // idempotent

    const kafkaA = await asUser(context, a);
    const groupA = `${accountGroupPrefix(a.account.eventsUsername)}reader`;
    await eventually("A's rights to reach the broker", 20_000, async () => assert.is(await describeAs(kafkaA, topicA), 'ok'));
    const got = await consumeAs(kafkaA, topicA, groupA, 3);
    assert.ok(Array.isArray(got), `A consumes its own topic: ${String(got)}`);
    const logged = await context.reader.bySeq(syncA, '0');
    assert.equal(
      got.map((m) => [m.key, m.value, m.eventId]),
      logged.map((e) => [e.recordId, e.value, e.eventKey]),
    );

    // Another account's topic: refused, for metadata and for consuming alike.
    assert.is(await describeAs(kafkaA, topicB), 'TOPIC_AUTHORIZATION_FAILED');
    assert.is(await consumeAs(kafkaA, topicB, `${accountGroupPrefix(a.account.eventsUsername)}other`, 1), 'TOPIC_AUTHORIZATION_FAILED');
    // Consumer groups: the account's own prefix is allowed, a group outside it (here: B's) is
    // refused. kafkajs hides the broker's answer behind "coordinator not found", so this asks
    // the broker directly.
    assert.is(await findCoordinatorAs(context, a, groupA), 'ok');
    assert.is(await findCoordinatorAs(context, a, a.account.eventsUsername), 'ok');
    assert.is(await findCoordinatorAs(context, a, `${accountGroupPrefix(b.account.eventsUsername)}steal`), 'GROUP_AUTHORIZATION_FAILED');
    assert.is(await findCoordinatorAs(context, a, `${a.account.eventsUsername}x`), 'GROUP_AUTHORIZATION_FAILED');
    assert.is(await consumeAs(kafkaA, topicA, `${accountGroupPrefix(b.account.eventsUsername)}steal`, 1), 'KafkaJSGroupCoordinatorNotFound');
    // B the other way round.
    const kafkaB = await asUser(context, b);
    await eventually("B's rights to reach the broker", 20_000, async () => assert.is(await describeAs(kafkaB, topicB), 'ok'));
    assert.is(await describeAs(kafkaB, topicA), 'TOPIC_AUTHORIZATION_FAILED');

    // A wrong password does not log in.
    const wrong = new KafkaClient({
      clientId: 'test-wrong',
      brokers: context.broker.saslBrokers,
      sasl: { mechanism: 'scram-sha-256', username: a.account.eventsUsername, password: 'not-the-password' },
      retry: { retries: 0 },
      logLevel: logLevel.NOTHING,
    });
    assert.match(await describeAs(wrong, topicA), /SASLAuthentication/);

    // Revoked: the sync is gone for A.
    await access.revokeSync(a.account.eventsUsername, syncA);
    await eventually('the revocation to take effect', 20_000, async () => assert.is(await describeAs(kafkaA, topicA), 'TOPIC_AUTHORIZATION_FAILED'));

    // Startup reconciliation from the control database: gives A its sync back, takes away a
    // stale grant on B's sync and one on A's sync that is being deleted.
    const syncGone = newSyncId();
    await insertSync(context, syncA, a, 'active');
    await insertSync(context, syncGone, a, 'deleting');
    await insertSync(context, syncB, b, 'active');
    await access.grantSync(a.account.eventsUsername, syncB);
    await access.grantSync(a.account.eventsUsername, syncGone);
    await eventually('the stale grant to take effect', 20_000, async () => assert.is(await describeAs(kafkaA, topicB), 'ok'));
    const grants = await accountGrants({ pool: context.pool, accounts: context.accounts });
    assert.equal(
      grants.map((g) => [g.username, g.syncIds]),
      [
        [a.account.eventsUsername, [syncA]],
        [b.account.eventsUsername, [syncB]],
      ],
    );
    const result = await access.reconcile(grants);
    assert.is(result.revoked, 4, 'READ and DESCRIBE of A on B’s sync and on the deleted one');
    await eventually('reconciliation to take effect', 20_000, async () => {
      assert.is(await describeAs(kafkaA, topicA), 'ok');
      assert.is(await describeAs(kafkaA, topicB), 'TOPIC_AUTHORIZATION_FAILED');
      assert.is(await describeAs(kafkaB, topicB), 'ok');
    });
    const again = await access.reconcile(await accountGrants({ pool: context.pool, accounts: context.accounts }));
    assert.is(again.revoked, 0, 'a second reconciliation changes nothing');

    // Removing the account: its user can no longer log in.
    await access.removeAccount(b.account.eventsUsername);
    await eventually('the user removal to take effect', 20_000, async () => assert.match(await describeAs(kafkaB, topicB), /SASLAuthentication/));
  } finally {
    await access.close();
  }
});

Relay.run();
Access.run();
