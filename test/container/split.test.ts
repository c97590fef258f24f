/**
 * The image against external servers, as a deployment runs it: the test run's PostgreSQL and
 * a Kafka broker, the fakes as upstreams. First the Procfile's lines, each the command of a
 * container of the one image; then docker/compose.yaml, checked by `compose config` and its
 * tributary service started with `compose run --no-deps` and an override naming these servers.
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import kafkajs from 'kafkajs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startFakeProcess, type FakeProcess } from '../harness/fake-process.ts';
import { sharedKafka, type KafkaBroker } from '../harness/kafka/index.ts';
import { freePort } from '../harness/ports.ts';
import { freshDatabase, query } from '../harness/postgres.ts';
import { repoRoot } from '../harness/process.ts';
import { AIRTABLE_TEST_TOKEN, loudSetUp, request, STRIPE_TEST_KEYS, waitBackfilled } from '../harness/service.ts';
import {
  buildImage,
  type Container,
  containerEngine,
  containerNamed,
  dockerCompose,
  type Engine,
  ensureBaseImage,
  IMAGE,
  runContainer,
  waitForHealth,
} from './engine.ts';

const STRIPE_KEY = STRIPE_TEST_KEYS[0]!;
const secrets = () => ({ TRIBUTARY_SECRET_KEY: randomBytes(32).toString('base64'), TRIBUTARY_ADMIN_TOKEN: `tra_${randomBytes(16).toString('hex')}` });

let engine: Engine;
let broker: KafkaBroker;
let airtable: FakeProcess;
let stripe: FakeProcess;

// uvu would swallow a failing set-up: loudSetUp says why (no container engine, a failed build).
test.before(
  loudSetUp(
    async () => {
      engine = await containerEngine();
      await ensureBaseImage(engine);
      await buildImage(engine);
      [broker, airtable, stripe] = await Promise.all([
        sharedKafka(),
        startFakeProcess({ kind: 'airtable', token: AIRTABLE_TEST_TOKEN, records: 30 }),
        startFakeProcess({ kind: 'stripe', key: STRIPE_KEY, customers: 5 }),
      ]);
    },
    () => undefined,
  ),
);

test.after(async () => {
  await Promise.all([airtable?.close(), stripe?.close()]);
  await broker?.stop();
});

interface Ports {
  api: string;
  proxy: string;
  events: string;
}

async function settings(): Promise<{ env: Record<string, string>; ports: Ports }> {
  const [api, proxy, events] = [await freePort(), await freePort(), await freePort()];
  return {
    ports: { api: `http://127.0.0.1:${api}`, proxy: `http://127.0.0.1:${proxy}`, events: `http://127.0.0.1:${events}` },
    env: {
      DATABASE_URL: await freshDatabase('image'),
      KAFKA_BROKERS: broker.brokers.join(','),
      TRIBUTARY_UPSTREAMS: `api.airtable.com=${airtable.url},api.stripe.com=${stripe.url}`,
      TRIBUTARY_API_PORT: String(api),
      TRIBUTARY_PROXY_PORT: String(proxy),
      TRIBUTARY_EVENTS_PORT: String(events),
      ...secrets(),
    },
  };
}

/** The first Kafka message on `topic` whose event is about `id`, within a minute. */
async function kafkaEventAbout(topic: string, id: string): Promise<{ event: string; id: string } | undefined> {
  const consumer = new kafkajs.Kafka({ clientId: 'image-test', brokers: broker.brokers, logLevel: kafkajs.logLevel.NOTHING }).consumer({
    groupId: `image-${randomBytes(4).toString('hex')}`,
  });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    return await new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), 60_000);
      void consumer.run({
        eachMessage: async ({ message }) => {
          const event = JSON.parse(message.value!.toString()) as { event: string; id: string };
          if (event.id === id) {
            clearTimeout(timer);
            resolve(event);
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
}

/**
 * What every deployment must do: an account, a sync of each kind backfilled, a proxied Stripe
 * create in the database when its answer comes, a wait, and the event over REST and Kafka.
 */
async function exercise(ports: Ports, adminToken: string): Promise<void> {
  const account = await request(ports.api, 'POST', '/api/accounts', { token: adminToken, body: { name: 'image' } });
  assert.is(account.status, 201, account.text);
  const token = account.body.api_token as string;
  const stripeSync = await request(ports.api, 'POST', '/api/syncs', { token, body: { kind: 'stripe', api_key: STRIPE_KEY } });
  assert.is(stripeSync.status, 201, stripeSync.text);
  const airtableSync = await request(ports.api, 'POST', '/api/syncs', {
    token,
    body: { kind: 'airtable', base_id: airtable.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(airtableSync.status, 201, airtableSync.text);
  const syncId = stripeSync.body.id as string;
  await Promise.all([waitBackfilled(ports.api, token, syncId), waitBackfilled(ports.api, token, airtableSync.body.id)]);

  const created = await fetch(`${ports.proxy}/api.stripe.com/v1/customers`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${STRIPE_KEY}:`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'email=split%40example.com&name=Split+Deployment',
  });
  assert.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };
  assert.equal(
    await query(stripeSync.body.database.url, 'SELECT name FROM customer WHERE id = $1', [id]),
    [{ name: 'Split Deployment' }],
    'in the database when the proxy answered',
  );
  const tables = await query<{ n: number }>(
    airtableSync.body.database.url,
    "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
  );
  assert.ok(tables[0]!.n > 0, 'the base has tables');
  const waited = await request(ports.api, 'GET', `/api/wait/${syncId}?timeout=30000`, { token });
  assert.is(waited.body?.ok, true, waited.text);

  const topic = `svc.${syncId}.customer`;
  const basic = `Basic ${Buffer.from(`${account.body.events.username}:${account.body.events.password}`).toString('base64')}`;
  let restEvent: { event: string } | undefined;
  for (const deadline = Date.now() + 30_000; !restEvent && Date.now() < deadline; await new Promise((r) => setTimeout(r, 500))) {
    const fetched = await request(ports.events, 'POST', '/fetch', { headers: { authorization: basic }, body: { topic, partition: 0, offset: 0 } });
    assert.is(fetched.status, 200, fetched.text);
    restEvent = (fetched.body as Array<{ value: string }>).map((m) => JSON.parse(m.value)).find((e: { id: string }) => e.id === id);
  }
  assert.is(restEvent?.event, 'inserted', 'the create is an event over REST');
  assert.is((await kafkaEventAbout(topic, id))?.event, 'inserted', 'and on Kafka');
}

test("the Procfile's roles, each a container of the image, against external PostgreSQL and Kafka", async () => {
  const { env, ports } = await settings();
  const procfile = await readFile(path.join(repoRoot, 'Procfile'), 'utf8');
  const roles = [...procfile.matchAll(/^(\w+):\s*(.+)$/gm)].map((m) => ({ name: m[1]!, command: m[2]!.trim().split(/\s+/) }));
  assert.equal(
    roles.map((r) => r.name),
    ['api', 'proxy', 'events', 'worker'],
  );
  const containers: Container[] = [];
  try {
    for (const role of roles) containers.push(await runContainer(engine, { name: `tributary-test-${role.name}`, env, command: role.command }));
    const logs = async () => (await Promise.all(containers.map(async (c) => `--- ${c.name} ---\n${(await c.logs()).slice(-1500)}`))).join('\n');
    await waitForHealth(`${ports.api}/healthz`, containers[0]!);
    await waitForHealth(`${ports.proxy}/healthz`, containers[1]!);
    await waitForHealth(`${ports.events}/healthz`, containers[2]!);
    await exercise(ports, env.TRIBUTARY_ADMIN_TOKEN!).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${await logs()}`);
    });
    // The HEALTHCHECK knows each container's roles from its command: the worker has no port.
    for (const container of containers) assert.ok(await container.healthy(), `${container.name}'s HEALTHCHECK passes`);
    for (const container of containers) {
      const stopped = await container.stop(10);
      assert.is(stopped.exitCode, 0, `${container.name} stopped on SIGTERM`);
    }
  } finally {
    for (const container of containers) await container.remove();
  }
});

test('compose.yaml passes `compose config`; its tributary service runs against external servers', async () => {
  const compose = await dockerCompose(engine);
  const composeFile = path.join(repoRoot, 'docker', 'compose.yaml');
  const { env, ports } = await settings();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-compose-'));
  const name = 'tributary-test-compose';
  try {
    const config = await compose.run(['-f', composeFile, 'config'], { ...process.env, ...env });
    assert.match(config, /tributary:/);
    const unset = await compose.run(['-f', composeFile, 'config'], { PATH: process.env.PATH }).catch((error: Error) => error.message);
    assert.match(unset, /set TRIBUTARY_SECRET_KEY/, 'a missing secret is named');

    // An operator's override for servers of their own; the host's network reaches the test's.
    // `run` starts the one service (`up --no-deps` would publish its ports, which host networking refuses).
    const override = path.join(dir, 'servers.yaml');
    const environment = Object.entries(env)
      .filter(([key]) => key !== 'TRIBUTARY_SECRET_KEY' && key !== 'TRIBUTARY_ADMIN_TOKEN')
      .map(([key, value]) => `      ${key}: "${value}"`)
      .join('\n');
    await writeFile(override, `services:\n  tributary:\n    image: ${IMAGE}\n    network_mode: host\n    environment:\n${environment}\n`);
    await engine.exec(['rm', '-f', '-v', name]).catch(() => undefined);
    const files = ['-p', 'tributarytest', '-f', composeFile, '-f', override];
    await compose.run([...files, 'run', '-d', '--no-deps', '--name', name, 'tributary'], { ...process.env, ...env });
    const container = containerNamed(engine, name);
    await waitForHealth(`${ports.api}/healthz`, container);
    await exercise(ports, env.TRIBUTARY_ADMIN_TOKEN!).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${(await container.logs()).slice(-3000)}`);
    });
  } finally {
    await engine.exec(['rm', '-f', '-v', '-t', '10', name]).catch(() => undefined);
    await engine.exec(['network', 'rm', '-f', 'tributarytest_default']).catch(() => undefined);
    // `compose run` makes the file's named volumes too, though this service uses none.
    await engine.exec(['volume', 'rm', '-f', 'tributarytest_pgdata']).catch(() => undefined);
    await compose.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
