/**
 * Commit-to-Kafka and commit-to-webhook latency at a steady rate of row changes, through
 * the real service (its own process: decoder, event log, relay, deliverer) and a real Kafka
 * broker. The floor it is compared with, measured in the same run: a bare kafkajs producer
 * to consumer round trip at the same rate, on the same broker.
 *
 *   node --import tsx bench/events-latency.ts [--rate 2000] [--seconds 20] [--warmup 5] [--webhook 0]
 *
 * The load runs for `warmup` seconds before the measured `seconds`, without a pause: the
 * figures are those of a steady state (JIT, connections, broker warm). The warm-up's own
 * figures are printed too; `--warmup 0` measures from the first change.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import pg from 'pg';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { createLogger, logProcessWarnings } from '../src/log.ts';
import { createTableStatements } from '../src/writer/shape.ts';
import { startKafka } from '../test/harness/kafka/index.ts';
import { api, arg, percentile, sleep, startPostgres, startServiceProcess } from './lib.ts';

// The floor's kafkajs client draws the same harmless Node warning as the service's relay.
logProcessWarnings(createLogger({ level: 'warn', destination: process.stderr }));

const RATE = arg('rate', 2000);
const SECONDS = arg('seconds', 20);
const WARMUP = arg('warmup', 5);
const TICK_MS = 10;
/** `--webhook 0` leaves the webhook out, to see the Kafka path alone. */
const WITH_WEBHOOK = arg('webhook', 1) === 1;
const PER_TICK = Math.round((RATE * TICK_MS) / 1000);
const TOKEN = 'patBENCHBENCHBENC.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

const stats = (label: string, values: number[]) =>
  `${label}: p50 ${percentile(values, 50).toFixed(1)} ms, p99 ${percentile(values, 99).toFixed(1)} ms, max ${Math.max(...values).toFixed(1)} ms (${values.length} changes)`;

/** CPU seconds (user + system) a process has used so far, from /proc (0 where there is none). */
function cpuSeconds(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** Sends `total` rows at the steady rate; `send(ids)` resolves when they are committed. */
async function steady(total: number, send: (ids: string[]) => Promise<void>, idOf: (n: number) => string, committed: Map<string, number>) {
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let tick = 0, n = 0; n < total; tick++) {
    const ids = Array.from({ length: Math.min(PER_TICK, total - n) }, (_, i) => idOf(n + i));
    n += ids.length;
    inFlight.push(
      send(ids).then(() => {
        const at = performance.now();
        for (const id of ids) committed.set(id, at);
      }),
    );
    const due = started + (tick + 1) * TICK_MS;
    await sleep(Math.max(0, due - performance.now()));
  }
  await Promise.all(inFlight);
}

async function main(): Promise<void> {
  const server = await startPostgres();
  const broker = await startKafka();
  const fake = await startFakeAirtable({ port: 0 });
  fake.addToken(TOKEN, { bases: '*' });
  fake.createBase({ id: 'appLATENCYLATENCY', name: 'Latency' });
  const svc = await startServiceProcess({
    controlUrl: await server.freshDatabase('ctl'),
    targetUrl: server.adminUrl,
    upstreams: `api.airtable.com=${fake.url}`,
    roles: 'api,decoder,events',
    env: {
      KAFKA_BROKERS: broker.brokers.join(','),
      TRIBUTARY_WEBHOOK_ALLOW_PRIVATE: '1',
      // 2,000 changes a second to one receiver of the operator's own: past the default per-host bound.
      TRIBUTARY_WEBHOOK_MAX_PER_HOST_PER_SECOND: '10000',
      TRIBUTARY_WEBHOOK_MAX_PER_ACCOUNT_PER_SECOND: '10000',
      ...(process.env.SVC_NODE_OPTIONS ? { NODE_OPTIONS: process.env.SVC_NODE_OPTIONS } : {}),
    },
  });
  const webhookAt = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const at = performance.now();
      const id = (JSON.parse(body) as { id: string }).id;
      if (!webhookAt.has(id)) webhookAt.set(id, at);
      res.writeHead(204).end();
    });
  });
  receiver.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const kafka = new Kafka({ clientId: 'latency-bench', brokers: broker.brokers, logLevel: logLevel.NOTHING });
  const consumers: Array<{ disconnect(): Promise<void> }> = [];
  let writer: pg.Pool | undefined;
  try {
    const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'latency' });
    const sync = await api(svc.api, account.api_token, 'POST', '/api/syncs', { kind: 'airtable', base_id: 'appLATENCYLATENCY', api_key: TOKEN });
    const dbUrl = new URL(sync.database.url as string);
    const admin = new URL(server.adminUrl);
    dbUrl.username = admin.username;
    dbUrl.password = admin.password;
    writer = new pg.Pool({ connectionString: dbUrl.toString(), max: 8 });
    const shape = {
      schema: 'public',
      name: 'items',
      key: 'id',
      columns: [
        { name: 'id', type: 'text' },
        { name: 'name', type: 'text' },
        { name: 'amount', type: 'bigint' },
      ],
    };
    for (const statement of createTableStatements(shape)) await writer.query(statement);
    const topic = `svc.${sync.id}.items`;
    if (WITH_WEBHOOK) {
      await api(svc.api, account.api_token, 'POST', `/api/syncs/${sync.id}/webhooks`, {
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        topics: [topic],
      });
    } else {
      webhookAt.set('warm', 0);
    }
    const insert = (ids: string[]) => writer!.query(`INSERT INTO items SELECT id, 'item ' || id, 100 FROM unnest($1::text[]) id`, [ids]).then(() => undefined);

    // Warm-up: the topic exists in Kafka and the consumer is caught up before timing starts.
    await insert(['warm']);
    const kafkaAt = new Map<string, number>();
    const consumer = kafka.consumer({ groupId: 'latency-bench', maxWaitTimeInMs: 5 });
    consumers.push(consumer);
    await consumer.connect();
    const kafkaAdmin = kafka.admin();
    await kafkaAdmin.connect();
    for (;;) {
      const topics = await kafkaAdmin.listTopics().catch(() => [] as string[]);
      if (topics.includes(topic)) break;
      await sleep(100);
    }
    await kafkaAdmin.createTopics({ topics: [{ topic: 'latency-floor', numPartitions: 1 }], waitForLeaders: true });
    await kafkaAdmin.disconnect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const id = message.key!.toString();
        if (!kafkaAt.has(id)) kafkaAt.set(id, performance.now());
      },
    });
    while (!kafkaAt.has('warm') || !webhookAt.has('warm')) await sleep(50);

    const total = RATE * SECONDS;
    const warm = RATE * WARMUP;
    const all = new Map<string, number>();
    console.log(`steady load: ${RATE} changes/s for ${WARMUP} s of warm-up, then ${SECONDS} s measured (${PER_TICK} rows every ${TICK_MS} ms)`);
    const cpuBefore = cpuSeconds(svc.child.pid);
    const benchCpuBefore = process.cpuUsage();
    const wallBefore = performance.now();
    await steady(warm + total, insert, (n) => (n < warm ? `w${n}` : `r${n - warm}`), all);
    const deadline = Date.now() + 120_000;
    while ((kafkaAt.size < warm + total + 1 || (WITH_WEBHOOK && webhookAt.size < warm + total + 1)) && Date.now() < deadline) await sleep(100);
    const committed = new Map([...all].filter(([id]) => id.startsWith('r')));
    const warmUp = new Map([...all].filter(([id]) => id.startsWith('w')));
    const cpu = cpuSeconds(svc.child.pid) - cpuBefore;
    const benchCpu = process.cpuUsage(benchCpuBefore);
    const wall = (performance.now() - wallBefore) / 1000;
    const latency = (arrivals: Map<string, number>, rows = committed) => [...rows].map(([id, at]) => (arrivals.get(id) ?? Infinity) - at);
    const toKafka = latency(kafkaAt);
    const toWebhook = latency(webhookAt);
    if (warm > 0) {
      console.log(stats('warm-up, not counted: commit → Kafka', latency(kafkaAt, warmUp)));
      if (WITH_WEBHOOK) console.log(stats('warm-up, not counted: commit → webhook', latency(webhookAt, warmUp)));
    }

    console.log(stats('commit → Kafka (through Tributary)', toKafka));
    if (WITH_WEBHOOK) console.log(stats('commit → webhook (through Tributary)', toWebhook));
    const lost = [...all.keys()].filter((id) => !kafkaAt.has(id) || (WITH_WEBHOOK && !webhookAt.has(id))).length;
    console.log(`changes missing on either path after 120 s: ${lost}`);
    console.log(
      `service CPU: ${cpu.toFixed(1)} s over ${wall.toFixed(1)} s (${((1e6 * cpu) / (warm + total)).toFixed(0)} µs per change); this process (load, receiver, consumer): ${((benchCpu.user + benchCpu.system) / 1e6).toFixed(1)} s`,
    );
    const floor = await floorLatency(kafka, total);
    console.log(stats('floor: kafkajs produce → consume, same rate, same broker', floor));
    console.log(
      `p99 ratio Tributary/floor: Kafka ${(percentile(toKafka, 99) / percentile(floor, 99)).toFixed(1)}×; targets p99 <= 100 ms: Kafka ${percentile(toKafka, 99) <= 100 ? 'met' : 'missed'}, webhook ${WITH_WEBHOOK ? (percentile(toWebhook, 99) <= 100 ? 'met' : 'missed') : 'not measured'}`,
    );
  } finally {
    for (const c of consumers) await c.disconnect().catch(() => undefined);
    await writer?.end();
    receiver.close();
    await svc.stop();
    await fake.close();
    await broker.stop();
    await server.stop();
  }
}

/** Produce at the steady rate and time each message from its send call to its consumption. */
async function floorLatency(kafka: Kafka, total: number): Promise<number[]> {
  const topic = 'latency-floor';
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  await producer.send({ topic, messages: [{ key: 'warm', value: 'x' }] });
  const consumedAt = new Map<string, number>();
  const consumer = kafka.consumer({ groupId: 'latency-floor', maxWaitTimeInMs: 5 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      consumedAt.set(message.key!.toString(), performance.now());
    },
  });
  while (!consumedAt.has('warm')) await sleep(50);
  const sentAt = new Map<string, number>();
  await steady(
    total,
    (ids) => {
      const at = performance.now();
      for (const id of ids) sentAt.set(id, at);
      // One send per tick, like the relay's rounds; the latency counts from the call.
      return producer.send({ topic, acks: -1, messages: ids.map((id) => ({ key: id, value: id })) }).then(() => undefined);
    },
    (n) => `g${n}`,
    new Map(),
  );
  const deadline = Date.now() + 60_000;
  while (consumedAt.size < total + 1 && Date.now() < deadline) await sleep(50);
  await producer.disconnect();
  await consumer.disconnect();
  return [...sentAt].map(([id, at]) => (consumedAt.get(id) ?? Infinity) - at);
}

await main();
