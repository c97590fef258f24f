/**
 * The service's path to the Kafka broker hangs without closing (a relay the broker advertises,
 * so every connection after the bootstrap goes through it, that stops passing bytes). Found by
 * the simulation's kafka-hang fault, where no event reached Kafka again and nothing was
 * logged: kafkajs kept its dead connection after the heal, so each send timed out in turn (16 s
 * here, with its retries), and the producer was replaced only after five of them, by a reset
 * that waited for the old producer's disconnect, which over the dead connection never ended.
 * Now a send, a connect and an admin call each have a deadline; past it the producer is
 * replaced at once, its disconnect given 5 s, and once the path heals the next send goes
 * through.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { TcpRelay } from '../sim/tcp-relay.ts';
import { createKafkaPublisher, type KafkaPublisher } from '../src/events/kafka/publisher.ts';
import { createLogger } from '../src/log.ts';
import { startKafka } from './harness/kafka/broker.ts';
import type { KafkaBroker } from './harness/kafka/types.ts';
import { LogCollector } from './harness/service.ts';

const REQUEST_TIMEOUT_MS = 2000;
let relay: TcpRelay | undefined;
let broker: KafkaBroker;
let publisher: KafkaPublisher;
const logs = new LogCollector();

test.before(async () => {
  broker = await startKafka({
    front: async (port) => {
      relay = await TcpRelay.start({ host: '127.0.0.1', port });
      return relay.port;
    },
  });
  publisher = createKafkaPublisher({
    brokers: broker.frontedBrokers!,
    logger: createLogger({ level: 'debug', destination: logs }),
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
  });
});

test.after(async () => {
  relay?.heal();
  await publisher?.close();
  await broker?.stop();
  await relay?.close();
});

const batch = (n: number) => [{ topic: 'hung-path', messages: [{ partition: 0, key: `k${n}`, value: `v${n}`, headers: {} }] }];

test('a send over a hung path fails at its deadline, and after the heal the next one is acknowledged', async () => {
  await publisher.ensureTopic('hung-path', 1);
  await publisher.send(batch(1));
  relay!.hang();
  const from = Date.now();
  const failed = await publisher.send(batch(2)).then(
    () => undefined,
    (error: Error) => error,
  );
  const took = Date.now() - from;
  assert.ok(failed, 'the send over the hung path failed');
  assert.ok(took < 2 * REQUEST_TIMEOUT_MS + 10_000, `it failed after ${took} ms`);
  relay!.heal();
  // The relay's loop sends again from its cursor; here, until one is acknowledged.
  const healedAt = Date.now();
  for (;;) {
    const error = await publisher.send(batch(3)).then(
      () => undefined,
      (e: Error) => e,
    );
    if (!error) break;
    assert.ok(Date.now() - healedAt < 30_000, `no send acknowledged 30 s after the heal: ${error.message}`);
  }
});

test.run();
