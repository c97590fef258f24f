/**
 * Syncs to events through the whole service: the sync workers write, the decoder turns the
 * WAL into the event log. Airtable's first build, edits, a schema rebuild (the rows that differ,
 * a new column's values included), a quiet cycle (nothing), deletes; Stripe objects as their object types.
 */
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeBase } from '../fakes/airtable/index.ts';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { type FakeProcess, startFakeProcess } from './harness/fake-process.ts';
import { waitForCycle } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import {
  AIRTABLE_TEST_TOKEN,
  createAccount,
  request,
  loudSetUp,
  startTestService,
  waitBackfilled,
  type TestAccount,
  type TestService,
} from './harness/service.ts';

type Event = { collection: string; data: Record<string, unknown>; event: string; id: string; table_db_name: string; changes?: Record<string, unknown> };

let svc: TestService;
let fake: FakeProcess;
let account: TestAccount;
let base: FakeBase;
let airtableSync: string;

const STRIPE_KEY = 'sk_test_pipelineKey000000000001';

async function events(syncId: string, afterSeq = 0): Promise<Array<Event & { topic: string; seq: number; key: string }>> {
  const rows = await query<{ topic: string; seq: string; event_key: string; value: string }>(
    svc.controlUrl,
    'SELECT topic, seq, event_key, value FROM events WHERE sync_id = $1 AND seq > $2 ORDER BY seq',
    [syncId, afterSeq],
  );
  return rows.map((r) => ({ ...(JSON.parse(r.value) as Event), topic: r.topic, seq: Number(r.seq), key: r.event_key }));
}

async function eventsUntil(syncId: string, afterSeq: number, accept: (list: Event[]) => boolean, what: string) {
  return waitFor(
    what,
    async () => {
      const list = await events(syncId, afterSeq);
      return accept(list) ? list : undefined;
    },
    20_000,
  );
}

async function lastSeq(syncId: string): Promise<number> {
  const rows = await query<{ seq: string }>(svc.controlUrl, 'SELECT seq FROM decoder_progress WHERE sync_id = $1', [syncId]);
  return Number(rows[0]?.seq ?? 0);
}

test.before(
  loudSetUp(
    async () => {
      // In a process of its own: beside the service in this one, the fake reads the sync's
      // requests late and bunched, counts more of them in a second than were sent, and answers
      // this test's own requests 429.
      fake = await startFakeProcess({ kind: 'stripe', key: STRIPE_KEY });
      svc = await startTestService({
        config: { roles: ['api', 'sync', 'decoder', 'events'], webhookAllowPrivate: true },
        tunables: {
          // Sweeps never paced: the quiet-cycle test waits for two whole cycles (pacing is airtable.pace.test's).
          airtable: { pollIntervalMs: 250, cycleGapMs: 250, pacedCycleMs: 0 },
          workerTickMs: 250,
          stripe: { pollIntervalMs: 300 },
          decoder: { lagReportMs: 300 },
        },
        stripeUrl: fake.url,
      });
      account = await createAccount(svc);
      base = svc.airtable.createBase({ name: 'Events' });
      base.createTable('Tasks', [
        { name: 'Name', type: 'singleLineText' },
        { name: 'Points', type: 'number', options: { precision: 0 } },
      ]);
      base.createRecords('Tasks', [
        { Name: 'one', Points: 1 },
        { Name: 'two', Points: 2 },
        { Name: 'three', Points: 3 },
      ]);
      const before = new Date();
      const created = await request(svc.api, 'POST', '/api/syncs', {
        token: account.token,
        body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
      });
      assert.is(created.status, 201, created.text);
      airtableSync = created.body.id;
      await waitForCycle(svc, account.token, airtableSync, before);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test("Airtable's first build gives one inserted event per record, on the table's topic", async () => {
  const list = await eventsUntil(airtableSync, 0, (l) => l.length >= 3, 'three inserted events');
  assert.equal(list.length, 3);
  assert.equal(
    list.map((e) => e.event),
    ['inserted', 'inserted', 'inserted'],
  );
  assert.equal(new Set(list.map((e) => e.topic)), new Set([`svc.${airtableSync}.tasks`]));
  assert.equal(list.map((e) => e.data.name).sort(), ['one', 'three', 'two']);
  const one = list.find((e) => e.data.name === 'one')!;
  assert.equal(one.collection, 'tasks');
  assert.equal(one.table_db_name, 'tasks');
  assert.equal(one.data.points, 1);
  assert.equal(one.id, one.data.id);
  assert.match(one.id, /^rec/);
});

test('an upstream edit is one updated event with the prior value; a quiet cycle adds nothing', async () => {
  const seq = await lastSeq(airtableSync);
  const record = base.records('Tasks').find((r) => r.fields.Name === 'two')!;
  base.updateRecord('Tasks', record.id, { Points: 20 });
  const list = await eventsUntil(airtableSync, seq, (l) => l.length >= 1, 'the update');
  assert.equal(list.length, 1);
  assert.equal(list[0]!.event, 'updated');
  assert.equal(list[0]!.id, record.id);
  assert.equal(list[0]!.changes, { points: 2 });
  assert.equal(list[0]!.data.points, 20);

  await waitForCycle(svc, account.token, airtableSync, new Date());
  await waitForCycle(svc, account.token, airtableSync, new Date());
  assert.equal((await events(airtableSync, seq)).length, 1, 'two full cycles later, still only the one event');
});

test('a new column whose cells are filled at once: its values reach the events, folded per record', async () => {
  const seq = await lastSeq(airtableSync);
  base.addField('Tasks', { name: 'Notes', type: 'singleLineText' });
  // Within moments of the field's creation, before any rebuild: every record gets a value,
  // and one record an edit of an old column too.
  const notes = new Map<string, string>();
  for (const record of base.records('Tasks')) {
    const name = String(record.fields.Name);
    notes.set(record.id, `note of ${name}`);
    base.updateRecord('Tasks', record.id, name === 'three' ? { Name: 'THREE', Notes: `note of ${name}` } : { Notes: `note of ${name}` });
  }
  const three = base.records('Tasks').find((r) => r.fields.Name === 'THREE')!;
  const reader = (await request(svc.api, 'GET', `/api/syncs/${airtableSync}`, { token: account.token })).body.database.url as string;
  await waitFor(
    'the notes column filled',
    async () => {
      const rows = await query<{ notes: string | null }>(reader, 'SELECT notes FROM tasks WHERE notes IS NOT NULL').catch(() => []);
      return rows.length === notes.size ? true : undefined;
    },
    20_000,
  );
  await waitForCycle(svc, account.token, airtableSync, new Date());

  // Folding every event of the table from the first gives each record's row, the new column included.
  const all = await events(airtableSync);
  const folded = new Map<string, Record<string, unknown>>();
  for (const e of all) {
    if (e.event === 'deleted') folded.delete(e.id);
    else folded.set(e.id, e.data);
  }
  const rows = await query<{ id: string; name: string; notes: string | null }>(reader, 'SELECT id, name, notes FROM tasks');
  for (const row of rows) assert.equal(folded.get(row.id), { ...folded.get(row.id), name: row.name, notes: row.notes }, row.id);
  for (const [id, note] of notes) assert.is(folded.get(id)?.notes, note, id);

  // Each record's new value came as an update naming the column with prior value null; the
  // edit of `name` carries its prior value, whether capture or the swap saw it first.
  const since = all.filter((e) => e.seq > seq);
  for (const id of notes.keys()) {
    const mine = since.filter((e) => e.id === id);
    assert.ok(mine.length >= 1 && mine.every((e) => e.event === 'updated'), JSON.stringify(mine));
    assert.ok(
      mine.some((e) => 'notes' in (e.changes ?? {}) && e.changes!.notes === null),
      JSON.stringify(mine),
    );
  }
  assert.ok(
    since.some((e) => e.id === three.id && e.changes?.name === 'three'),
    JSON.stringify(since),
  );
});

test('an upstream delete is a deleted event with the whole row', async () => {
  const seq = await lastSeq(airtableSync);
  const record = base.records('Tasks').find((r) => r.fields.Name === 'one')!;
  base.deleteRecords('Tasks', [record.id]);
  const list = await eventsUntil(airtableSync, seq, (l) => l.length >= 1, 'the delete');
  assert.equal(list[0]!.event, 'deleted');
  assert.equal(list[0]!.id, record.id);
  assert.equal(list[0]!.data.name, 'one');
  assert.equal(list[0]!.data.points, 1);
});

test('Stripe objects are events of their object type: create, update, delete', async () => {
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: STRIPE_KEY } });
  assert.is(created.status, 201, created.text);
  const syncId = created.body.id as string;
  const url = new URL(fake.url);
  // Changes made once the backfill is done: a backfill takes the sync's share of the account's
  // rate, and with requests bunched on a loaded machine a direct client beside it drew 429s past
  // any retries (a client of a busy account; not what this test is about). Its own 429s are
  // still retried, as such a client does.
  await waitBackfilled(svc.api, account.token, syncId);
  const stripe = new Stripe(STRIPE_KEY, {
    host: url.hostname,
    port: Number(url.port),
    protocol: 'http',
    apiVersion: STRIPE_API_VERSION as never,
    maxNetworkRetries: 8,
  });
  const customer = await stripe.customers.create({ email: 'ev@example.com', name: 'Event Customer' });
  const inserted = await eventsUntil(syncId, 0, (l) => l.some((e) => e.id === customer.id), 'the customer');
  const insert = inserted.find((e) => e.id === customer.id)!;
  assert.equal(insert.event, 'inserted');
  assert.equal(insert.collection, 'customer');
  assert.equal(insert.table_db_name, 'customer');
  assert.equal(insert.topic, `svc.${syncId}.customer`);
  assert.equal(insert.data.email, 'ev@example.com');

  const seq = await lastSeq(syncId);
  await stripe.customers.update(customer.id, { name: 'Renamed' });
  const updated = await eventsUntil(syncId, seq, (l) => l.some((e) => e.id === customer.id && e.event === 'updated'), 'the update');
  const update = updated.find((e) => e.id === customer.id && e.event === 'updated')!;
  assert.equal(update.changes?.name, 'Event Customer');
  assert.equal(update.data.name, 'Renamed');

  const seq2 = await lastSeq(syncId);
  await stripe.customers.del(customer.id);
  const deleted = await eventsUntil(syncId, seq2, (l) => l.some((e) => e.event === 'deleted'), 'the delete');
  const deletion = deleted.find((e) => e.event === 'deleted')!;
  assert.equal(deletion.id, customer.id);
  assert.equal(deletion.data.name, 'Renamed');
  const noMeta = await query<{ n: string }>(svc.controlUrl, "SELECT count(*) AS n FROM events WHERE sync_id = $1 AND value LIKE '%_sync_meta%'", [syncId]);
  assert.equal(noMeta[0]!.n, '0', '_sync_meta updates are no events');
});

test('a webhook added through the API receives the next change, signed', async () => {
  const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const port = (receiver.address() as AddressInfo).port;
    const topic = `svc.${airtableSync}.tasks`;
    const created = await request(svc.api, 'POST', `/api/syncs/${airtableSync}/webhooks`, {
      token: account.token,
      body: { url: `http://127.0.0.1:${port}/hook`, topics: [topic] },
    });
    assert.is(created.status, 201, created.text);
    const secret = Buffer.from((created.body.secret as string).replace(/^whsec_/, ''), 'base64');
    const record = base.records('Tasks').find((r) => r.fields.Name === 'THREE')!;
    base.updateRecord('Tasks', record.id, { Points: 33 });
    const delivery = await waitFor('the webhook delivery', async () => received.find((r) => r.body.includes('"points":33')), 20_000);
    const event = JSON.parse(delivery.body) as Event;
    assert.equal(event.event, 'updated');
    assert.equal(event.changes, { points: 3 });
    const id = delivery.headers['webhook-id'] as string;
    const timestamp = delivery.headers['webhook-timestamp'] as string;
    assert.is(delivery.headers['svc-event-id'], id);
    const expected = createHmac('sha256', secret).update(`${id}.${timestamp}.${delivery.body}`).digest('base64');
    assert.ok((delivery.headers['webhook-signature'] as string).split(' ').includes(`v1,${expected}`), 'Standard Webhooks signature');
    const logged = await query<{ event_key: string }>(svc.controlUrl, 'SELECT event_key FROM events WHERE sync_id = $1 AND value = $2', [
      airtableSync,
      delivery.body,
    ]);
    assert.equal(
      logged.map((r) => r.event_key),
      [id],
      'the body is the logged event; webhook-id is its idempotency key',
    );
  } finally {
    receiver.close();
  }
});

test("the sync's view shows how many events are logged and the slot's lag", async () => {
  const seq = await lastSeq(airtableSync);
  const view = await waitFor(
    'a lag report',
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${airtableSync}`, { token: account.token });
      return typeof answer.body.events.slot_lag_bytes === 'number' ? answer.body : undefined;
    },
    10_000,
  );
  assert.is(view.events.logged, seq);
  assert.ok(view.events.slot_lag_bytes >= 0);
  assert.is(view.events.topic_prefix, `svc.${airtableSync}.`);
});

test.run();
