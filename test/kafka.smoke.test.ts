/**
 * Smoke test for the Kafka harness: a real broker round-trips messages
 * through kafkajs, and the SASL listener accepts exactly the admin's SCRAM
 * credentials. The shared broker is not stopped here: other suites in the
 * same process reuse it and the harness kills it when the process exits.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomUUID } from 'node:crypto';
import { Kafka, Partitioners, logLevel, type Admin, type Consumer, type IHeaders, type KafkaMessage, type Producer } from 'kafkajs';
import { sharedKafka } from './harness/kafka/index.ts';

const CONSUME_TIMEOUT_MS = 30_000;

function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

function headerText(headers: IHeaders | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return value === undefined ? undefined : String(Array.isArray(value) ? value[0] : value);
}

/** Runs the consumer until `count` messages arrived, or fails after a timeout. */
function consumeN(consumer: Consumer, count: number): Promise<KafkaMessage[]> {
  return new Promise((resolve, reject) => {
    const received: KafkaMessage[] = [];
    const timer = setTimeout(() => reject(new Error(`only ${received.length} of ${count} messages within ${CONSUME_TIMEOUT_MS} ms`)), CONSUME_TIMEOUT_MS);
    consumer
      .run({
        eachMessage: async ({ message }) => {
          received.push(message);
          if (received.length === count) {
            clearTimeout(timer);
            resolve(received);
          }
        },
      })
      .catch((err: unknown) => {
        clearTimeout(timer);
        reject(err);
      });
  });
}

test('produces and consumes keys, values and headers in order', async () => {
  const broker = await sharedKafka();
  const kafka = new Kafka({ clientId: 'smoke', brokers: broker.brokers, logLevel: logLevel.WARN });
  const topic = uniqueName('smoke');
  const admin: Admin = kafka.admin();
  // An explicit partitioner also silences kafkajs's "switched default partitioner" warning.
  const producer: Producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const consumer: Consumer = kafka.consumer({ groupId: uniqueName('smoke-group') });
  try {
    await admin.connect();
    const created = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    assert.ok(created, 'topic should be newly created');

    const sent = Array.from({ length: 5 }, (_, i) => ({
      key: `key-${i}`,
      value: JSON.stringify({ seq: i, text: `message ${i}` }),
      headers: { 'content-type': 'application/json', seq: String(i) },
    }));
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: sent });

    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const received = await consumeN(consumer, sent.length);

    assert.equal(
      received.map((m) => m.key?.toString()),
      sent.map((m) => m.key),
    );
    assert.equal(
      received.map((m) => m.value?.toString()),
      sent.map((m) => m.value),
    );
    assert.equal(
      received.map((m) => [headerText(m.headers, 'content-type'), headerText(m.headers, 'seq')]),
      sent.map((m) => [m.headers['content-type'], m.headers.seq]),
    );
    assert.equal(
      received.map((m) => m.offset),
      ['0', '1', '2', '3', '4'],
    );
  } finally {
    await consumer.disconnect();
    await producer.disconnect();
    await admin.disconnect();
  }
});

test('SASL listener accepts the admin SCRAM-SHA-256 user and rejects a wrong password', async () => {
  const broker = await sharedKafka();
  const { username, password } = broker.adminUser;
  const topic = uniqueName('smoke-sasl');

  const plain = new Kafka({ clientId: 'smoke-plain', brokers: broker.brokers, logLevel: logLevel.WARN }).admin();
  const scram = new Kafka({
    clientId: 'smoke-scram',
    brokers: broker.saslBrokers,
    sasl: { mechanism: 'scram-sha-256', username, password },
    logLevel: logLevel.WARN,
  }).admin();
  const wrong = new Kafka({
    clientId: 'smoke-wrong-password',
    brokers: broker.saslBrokers,
    sasl: { mechanism: 'scram-sha-256', username, password: `${password}-wrong` },
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  }).admin();
  try {
    await plain.connect();
    await plain.createTopics({ topics: [{ topic }], waitForLeaders: true });

    await scram.connect();
    // Describe on a topic needs rights, so seeing it proves both login and super-user status.
    const topics = await scram.listTopics();
    assert.ok(topics.includes(topic), `SCRAM admin should see ${topic}, saw ${topics.join(', ')}`);

    let failure: unknown;
    try {
      await wrong.connect();
    } catch (err) {
      failure = err;
    }
    assert.instance(failure, Error, 'connecting with a wrong password must fail');
    assert.match((failure as Error).name, 'SASLAuthentication');
  } finally {
    await wrong.disconnect();
    await scram.disconnect();
    await plain.disconnect();
  }
});

test.run();
