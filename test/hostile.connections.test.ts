/**
 * A server out of connection slots must not end any loop, or the process: with the slots of
 * the server that holds the control database and the sync databases all taken from outside
 * (as one tenant's readers once took 597 of 600), the decoder, appenders, runners, proxy
 * write-through, webhook deliverers and Kafka relay fail for a while; once the slots are free
 * they all recover without a restart, and nothing is lost, for a Stripe tenant and an Airtable
 * tenant alike. It once ended the process on an unhandled rejection from the decoder's flush
 * chain.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Airtable from 'airtable';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { topicName } from '../src/events/log.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { pause } from '../src/time.ts';
import { airtableJs } from './harness/airtable.ts';
import { CrashablePostgres } from './harness/crashable-postgres.ts';
import { sharedKafka } from './harness/kafka/index.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import {
  AIRTABLE_TEST_TOKEN,
  airtableSyncBody,
  createAccount,
  request,
  startTestService,
  STRIPE_TEST_KEYS,
  stripeSyncBody,
  type TestService,
  waitBackfilled,
  waitOk,
} from './harness/service.ts';

let dir: string;
let server: CrashablePostgres;
let svc: TestService;
let receiver: http.Server;
let brokers: string[];
const received: Array<{ id: string; data: { name?: string } }> = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

test.before(async () => {
  process.on('unhandledRejection', onUnhandled);
  dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-full-'));
  // A small server: 60 slots, 10 of them reserved for superusers.
  server = await CrashablePostgres.start('full', dir, 60);
  await query(server.adminUrl, 'CREATE DATABASE ctl');
  brokers = (await sharedKafka()).brokers;
  svc = await startTestService({
    config: {
      databaseUrl: server.databaseUrl('ctl'),
      targetDatabaseUrl: server.adminUrl,
      roles: ['api', 'proxy', 'sync', 'decoder'],
      webhookAllowPrivate: true,
      kafkaBrokers: brokers,
    },
    tunables: {
      // Within the waits' 60 s: a runner that goes silent (runs 31 and 36) is reported with its
      // database's busy sessions, and the test fails on it below.
      syncStuckMs: 30_000,
      workerTickMs: 250,
      stripe: { pollIntervalMs: 500 },
      airtable: { pollIntervalMs: 250 },
      webhooks: { schedule: { initialDelayMs: 200, maxDelayMs: 2000 } },
    },
  });
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

test.after(async () => {
  process.off('unhandledRejection', onUnhandled);
  receiver?.close();
  await svc?.stop();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

/**
 * Takes every slot of the server, as the superuser: not even reserved ones stay free. The
 * service's own connections are ended too (as a restart or a failover would end them), then
 * their slots taken before it gets them back, a few times over.
 */
async function fillSlots(): Promise<pg.Client[]> {
  const held: pg.Client[] = [];
  const mine = new Set<number>();
  for (let round = 0; round < 3; round++) {
    for (;;) {
      const client = new pg.Client({ connectionString: server.adminUrl });
      client.on('error', () => undefined);
      try {
        await client.connect();
      } catch (error) {
        assert.match((error as Error).message, /too many clients|reserved for/);
        break;
      }
      held.push(client);
      mine.add(Number((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid));
    }
    await held[0]!.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> ALL($1::int[]) AND backend_type IN ('client backend', 'walsender')",
      [[...mine]],
    );
  }
  return held;
}

/**
 * A wait that failed once the slots were free says what every session of the server was doing
 * then (what it ran, what it waited on): a runner that stalled once here logged nothing.
 */
async function explained(wait: () => Promise<void>): Promise<void> {
  try {
    await wait();
  } catch (error) {
    const sessions = await query<{ datname: string | null; state: string | null; wait: string | null; age_s: number; query: string }>(
      server.adminUrl,
      `SELECT datname, state, wait_event_type || ':' || wait_event AS wait, round(extract(epoch FROM now() - query_start))::int AS age_s, left(query, 120) AS query
         FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle' ORDER BY query_start`,
    ).catch((e: Error) => [{ datname: null, state: null, wait: null, age_s: 0, query: `pg_stat_activity unreadable: ${e.message}` }]);
    const lines = sessions.map((s) => `${s.datname} ${s.state} ${s.wait ?? '-'} ${s.age_s}s ${s.query}`);
    throw new Error(`${(error as Error).message}\nsessions not idle:\n${lines.join('\n') || '(none)'}`);
  }
}

/** Reads a topic from the start until every `id:name` wanted has been seen (60 s at most). */
async function kafkaNames(topic: string, wanted: string[]): Promise<boolean> {
  const consumer = new Kafka({ clientId: 'hostile-connections', brokers, logLevel: logLevel.NOTHING }).consumer({ groupId: `full-${Date.now()}` });
  const missing = new Set(wanted);
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    return await new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => resolve(false), 60_000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            const event = JSON.parse(message.value!.toString()) as { id: string; data: { name?: string } };
            missing.delete(`${event.id}:${event.data.name}`);
            if (missing.size === 0) {
              clearTimeout(timer);
              resolve(true);
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
}

test("with every connection slot taken from outside, the service's loops wait, then recover without a restart, nothing lost", async () => {
  const account = await createAccount(svc);
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripeSyncBody() });
  assert.is(created.status, 201, created.text);
  const syncId: string = created.body.id;
  const hook = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: account.token,
    body: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`, topics: [`svc.${syncId}.customer`] },
  });
  assert.is(hook.status, 201, hook.text);
  const fake = new URL(svc.stripe!.url);
  const direct = new Stripe(STRIPE_TEST_KEYS[0]!, {
    host: fake.hostname,
    port: Number(fake.port),
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 0,
  });
  const proxied = new Stripe(STRIPE_TEST_KEYS[0]!, {
    host: '127.0.0.1',
    port: svc.service.proxyPort!,
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 0,
    timeout: 60_000,
  });
  const first = await direct.customers.create({ name: 'Before' });
  const second = await direct.customers.create({ name: 'Before' });
  await waitBackfilled(svc.api, account.token, syncId, 60_000);
  await waitOk(svc, account.token, syncId, 30_000);

  // Another tenant, on Airtable, on the same server.
  const other = await createAccount(svc, 'initech');
  const base = svc.airtable.createBase({ name: 'Other tenant' });
  base.createTable('Clients', [{ name: 'Name', type: 'singleLineText' }]);
  const [changed, written] = base.createRecords('Clients', [{ Name: 'Before' }, { Name: 'Before' }]).map((r) => r.id) as [string, string];
  const otherSync = await request(svc.api, 'POST', '/api/syncs', { token: other.token, body: airtableSyncBody(base.id) });
  assert.is(otherSync.status, 201, otherSync.text);
  const otherId: string = otherSync.body.id;
  await waitBackfilled(svc.api, other.token, otherId, 60_000);
  await waitOk(svc, other.token, otherId, 30_000);
  const clients = new Airtable({
    apiKey: AIRTABLE_TEST_TOKEN,
    endpointUrl: `http://127.0.0.1:${svc.service.proxyPort}/api.airtable.com`,
    noRetryIfRateLimited: true,
    requestTimeout: 60_000,
  }).base(base.id)('Clients');

  // Changes keep coming while the server is full: batches are in flight when it refuses.
  const busy = await direct.customers.create({ name: 'Busy 0' });
  let edits = 0;
  let editing = true;
  const editor = (async () => {
    while (editing) {
      await direct.customers.update(busy.id, { name: `Busy ${++edits}` });
      await pause(150);
    }
  })();
  await pause(1000);
  const held = await fillSlots();
  assert.ok(held.length > 0, 'slots were taken');
  let proxiedAnswer: Promise<Stripe.Customer>;
  let airtableAnswer: Promise<unknown>;
  try {
    // While the server refuses everyone: a change upstream the sync must pick up, and a
    // proxied write whose write-through must wait.
    await direct.customers.update(first.id, { name: 'Changed while full' });
    proxiedAnswer = proxied.customers.update(second.id, { name: 'Proxied while full' });
    proxiedAnswer.catch(() => undefined);
    base.updateRecord('Clients', changed, { Name: 'Changed while full' });
    airtableAnswer = airtableJs(clients.update(written, { Name: 'Proxied while full' }));
    airtableAnswer.catch(() => undefined);
    await pause(4000);
  } finally {
    for (const client of held) await client.end().catch(() => undefined);
    editing = false;
    await editor;
  }

  const answer: Stripe.Customer | Error = await proxiedAnswer.catch((error: Error) => error);
  if (answer instanceof Error) {
    // Refused before it left: a 503 from the proxy, nothing done upstream; the client retries.
    assert.is((answer as Stripe.errors.StripeError).statusCode, 503, answer.message);
    assert.match(answer.message, /not sent upstream/);
    assert.is(((await direct.customers.retrieve(second.id)) as Stripe.Customer).name, 'Before', 'not forwarded');
    assert.is((await proxied.customers.update(second.id, { name: 'Proxied while full' })).name, 'Proxied while full');
  } else {
    assert.is(answer.name, 'Proxied while full');
  }
  const airtableResult = await airtableAnswer.catch((error: Error) => error);
  if (airtableResult instanceof Error) {
    // airtable.js shows its own words for a 503, not the proxy's "not sent upstream".
    assert.match(airtableResult.message, /\[Http code 503\]/, airtableResult.message);
    assert.is(base.records('Clients').find((r) => r.id === written)?.fields.Name, 'Before', 'not forwarded');
    await airtableJs(clients.update(written, { Name: 'Proxied while full' }));
  }
  await explained(() => waitOk(svc, account.token, syncId, 60_000));
  await explained(() => waitOk(svc, other.token, otherId, 60_000));
  const otherRows = await query<{ id: string; name: string }>(otherSync.body.database.url, 'SELECT id, name FROM clients ORDER BY id');
  assert.equal(otherRows.map((r) => `${r.id}:${r.name}`).sort(), [`${changed}:Changed while full`, `${written}:Proxied while full`].sort());
  const rows = await query<{ id: string; name: string }>(created.body.database.url, 'SELECT id, name FROM customer WHERE id = ANY($1) ORDER BY name', [
    [busy.id, first.id, second.id],
  ]);
  assert.equal(
    rows.map((r) => r.name),
    [`Busy ${edits}`, 'Changed while full', 'Proxied while full'],
  );
  await waitFor(
    'the changes delivered to the webhook',
    async () => {
      const names = new Set(received.map((e) => `${e.id}:${e.data.name}`));
      return names.has(`${first.id}:Changed while full`) && names.has(`${second.id}:Proxied while full`) && names.has(`${busy.id}:Busy ${edits}`)
        ? true
        : undefined;
    },
    60_000,
  );
  // Kafka: the relay carried on from where it stopped.
  const onKafka = await kafkaNames(topicName(syncId, 'customer'), [
    `${first.id}:Changed while full`,
    `${second.id}:Proxied while full`,
    `${busy.id}:Busy ${edits}`,
  ]);
  assert.ok(onKafka, 'the changes reached Kafka');
  assert.equal(unhandled, [], 'no unhandled rejection');
  const stuck = svc.logs.lines.filter((l) => l.includes("a stuck sync runner's database"));
  assert.equal(stuck, [], 'no runner was taken for stuck');
  // The loops are the ones that started with the service: it never restarted them.
  for (const [id, token] of [
    [syncId, account.token],
    [otherId, other.token],
  ] as const) {
    const view = (await request(svc.api, 'GET', `/api/syncs/${id}`, { token })).body;
    await waitFor(
      `${id} to turn normal`,
      async () => ((await request(svc.api, 'GET', `/api/syncs/${id}`, { token })).body.status.indicator === 'normal' ? true : undefined),
      60_000,
    ).catch(() => {
      throw new Error(`${id} stayed ${view.status.indicator}: ${view.status.last_error}`);
    });
  }
});

test.run();
