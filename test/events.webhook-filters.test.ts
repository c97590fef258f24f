/**
 * Webhook filters: which events a destination is sent. Checked against real deliveries to
 * real receivers: what does not match is not sent, leaves no delivery row and does not hold
 * the cursor back; a filter changed through the API reaches the running deliverer; and a
 * filter naming anything unknown is a 400 that makes or changes nothing.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { compileFilter, eventKindOf } from '../src/events/webhooks/filter.ts';
import { pause, request, startWebhookWorld, taken, until, type WebhookWorld } from './harness/webhooks.ts';

let world: WebhookWorld;

test.before(async () => {
  world = await startWebhookWorld();
});

test.after(async () => {
  await world?.stop();
});

const topic = (syncId: string, collection = 'customer') => `svc.${syncId}.${collection}`;

/** Per record, the `n` of each event taken, in the order taken. */
function perRecord(received: Parameters<typeof taken>[0]): Record<string, unknown[]> {
  const map: Record<string, unknown[]> = {};
  for (const event of taken(received)) (map[event.id] ??= []).push(event.n);
  return map;
}

async function deliveryRows(webhookId: string): Promise<number> {
  const { rows } = await world.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries WHERE destination_id = $1', [webhookId]);
  return rows[0]!.n;
}

async function cursorOf(webhookId: string): Promise<string> {
  const { rows } = await world.pool.query<{ cursor_seq: string }>('SELECT cursor_seq FROM webhook_destinations WHERE id = $1', [webhookId]);
  return rows[0]!.cursor_seq;
}

// ── the filter itself ─────────────────────────────────────────────────────

test("an event's kind is read at the top level, whatever columns named `event` hold", () => {
  const event = (data: unknown, kind: string, changes?: unknown) =>
    JSON.stringify({ collection: 'c', created_at: 'x', data, event: kind, id: 'r', table_db_name: 'c', ...(changes ? { changes } : {}) });
  assert.is(eventKindOf(event({ id: 'r' }, 'inserted')), 'inserted');
  assert.is(eventKindOf(event({ event: 'deleted', nested: { event: 'read', list: [{ event: 'x' }] } }, 'updated', { event: 'inserted' })), 'updated');
  assert.is(eventKindOf(event({ note: 'a "quoted" \\"event\\":\\"deleted\\" text', meta: { a: ['}', '{'] } }, 'read')), 'read');
  const only = compileFilter({ events: ['deleted'] })!;
  assert.ok(only(event({ event: 'updated' }, 'deleted')));
  assert.not.ok(only(event({ event: 'deleted' }, 'updated', { event: 'deleted' })));
  assert.is(compileFilter(null), undefined);
});

test('changed and where: exact JSON comparison, a missing column is null, other kinds pass `changed`', () => {
  const event = (kind: string, data: Record<string, unknown>, changes?: Record<string, unknown>) =>
    JSON.stringify({ collection: 'c', created_at: 'x', data, event: kind, id: 'r', table_db_name: 'c', ...(changes ? { changes } : {}) });
  const changed = compileFilter({ changed: ['email', 'status'] })!;
  assert.ok(changed(event('updated', {}, { email: 'old@x' })));
  assert.ok(changed(event('updated', {}, { status: null })), 'a column whose prior value was null changed too');
  assert.not.ok(changed(event('updated', {}, { balance: 1 })));
  assert.ok(changed(event('inserted', {})), 'other kinds pass');
  const where = compileFilter({ where: { status: 'active', balance: { in: [0, 100] }, email: { not_null: true }, deleted_at: null } })!;
  assert.ok(where(event('updated', { status: 'active', balance: 100, email: 'a@x' })));
  assert.not.ok(where(event('updated', { status: 'active', balance: '100', email: 'a@x' })), 'the string "100" is not the number 100');
  assert.not.ok(where(event('updated', { status: 'active', balance: 0, email: null })));
  assert.not.ok(where(event('updated', { status: 'active', balance: 0, email: 'a@x', deleted_at: '2024-01-01' })));
  assert.not.ok(where(event('updated', { status: { nested: 'active' }, balance: 0, email: 'a@x' })));
  assert.ok(compileFilter({ where: { status: { eq: 'past_due' } } })!(event('deleted', { status: 'past_due' })));
  const both = compileFilter({ events: ['updated'], changed: ['status'], where: { status: 'active' } })!;
  assert.ok(both(event('updated', { status: 'active' }, { status: 'trialing' })));
  assert.not.ok(both(event('inserted', { status: 'active' })));
});

// ── delivery ──────────────────────────────────────────────────────────────

test('each destination is sent only what matches its filter, in order per record; the rest leave no row and hold nothing back', async () => {
  const syncId = await world.newSync();
  const receivers = { kinds: await world.receiver(), changed: await world.receiver(), where: await world.receiver(), reads: await world.receiver() };
  const kinds = await world.createWebhook(syncId, {
    url: receivers.kinds.url,
    topics: [topic(syncId), topic(syncId, 'invoice')],
    filter: { events: ['deleted', 'inserted', 'deleted'] },
  });
  assert.equal(kinds.filter, { events: ['inserted', 'deleted'] }, 'kinds listed once, in their usual order');
  const changed = await world.createWebhook(syncId, { url: receivers.changed.url, topics: [topic(syncId)], filter: { changed: ['email'] } });
  const where = await world.createWebhook(syncId, {
    url: receivers.where.url,
    topics: [topic(syncId)],
    filter: { events: ['updated'], where: { status: 'active', balance: { in: [10, 20] } } },
  });
  const reads = await world.createWebhook(syncId, { url: receivers.reads.url, topics: [topic(syncId)], filter: { events: ['read'] } });
  world.deliver(syncId);
  await world.log(syncId, [
    { id: 'c1', kind: 'inserted', data: { status: 'active', balance: 10 } },
    { id: 'c1', kind: 'updated', data: { status: 'active', balance: 10, email: 'a@x' }, changes: { email: null } },
    { id: 'c1', kind: 'updated', data: { status: 'inactive', balance: 10 }, changes: { status: 'active' } },
    { id: 'c2', kind: 'read', data: { status: 'active', balance: 20 } },
    { id: 'c1', kind: 'updated', data: { status: 'active', balance: 20 }, changes: { status: 'inactive', balance: 10 } },
    { id: 'i1', kind: 'inserted', collection: 'invoice', data: { total: 5 } },
    { id: 'c2', kind: 'updated', data: { status: 'active', balance: '20', event: 'deleted' }, changes: { balance: 19 } },
    { id: 'c1', kind: 'deleted', data: { status: 'active', balance: 20 } },
  ]);
  // The n of each event is its place in the log above (1-based).
  await until('kinds', () => receivers.kinds.accepted.length >= 3);
  await until('changed', () => receivers.changed.accepted.length >= 4);
  await until('where', () => receivers.where.accepted.length >= 2);
  await until('reads', () => receivers.reads.accepted.length >= 1);
  const last = await world.reader.lastSeq(syncId);
  for (const webhook of [kinds, changed, where, reads]) await until('the cursor at the end of the log', async () => (await cursorOf(webhook.id)) === last);
  await pause(200);
  // Per record, the events sent in log order (records in different lanes may interleave either way).
  assert.equal(perRecord(receivers.kinds.accepted), { c1: [1, 8], i1: [6] });
  assert.equal(perRecord(receivers.changed.accepted), { c1: [1, 2, 8], c2: [4] }, 'only the update that changed email; inserts, reads and deletes pass');
  assert.equal(
    perRecord(receivers.where.accepted),
    { c1: [2, 5] },
    'c1\'s matching updates, with a gap where it did not match; c2\'s balance "20" is a string',
  );
  assert.equal(
    taken(receivers.reads.accepted).map((e) => [e.id, e.kind]),
    [['c2', 'read']],
  );
  for (const webhook of [kinds, changed, where, reads]) assert.is(await deliveryRows(webhook.id), 0, 'nothing written for skipped events');
});

test('a filter changed or removed through the API reaches the running deliverer at once', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  const webhook = await world.createWebhook(syncId, { url: receiver.url, topics: [topic(syncId)] });
  world.deliver(syncId, { tuning: { lanes: 4, flushMs: 20, idleMs: 300, refreshMs: 60_000, reloadGapMs: 20 } });
  await world.log(syncId, [{ id: 'a', kind: 'inserted' }]);
  await until('the first event', () => receiver.accepted.length === 1);

  // No periodic look within the test (refreshMs is a minute): only the wakeup brings the change.
  const started = Date.now();
  const patched = await world.changed(webhook.id, () =>
    request(world.apiUrl, 'PATCH', `/api/syncs/${syncId}/webhooks/${webhook.id}`, {
      token: world.account.token,
      body: { filter: { events: ['deleted'] } },
    }),
  );
  assert.ok(Date.now() - started < 2_000, `taken after ${Date.now() - started} ms`);
  assert.is(patched.status, 200, patched.text);
  assert.equal(patched.body.filter, { events: ['deleted'] });
  await world.log(syncId, [
    { id: 'a', kind: 'updated' },
    { id: 'a', kind: 'deleted' },
    { id: 'b', kind: 'inserted' },
  ]);
  await until('the deletion', () => receiver.accepted.length === 2);
  await pause(200);
  assert.equal(
    taken(receiver.accepted).map((e) => e.kind),
    ['inserted', 'deleted'],
  );

  const removed = await world.changed(webhook.id, () =>
    request(world.apiUrl, 'PATCH', `/api/syncs/${syncId}/webhooks/${webhook.id}`, { token: world.account.token, body: { filter: null } }),
  );
  assert.is(removed.status, 200, removed.text);
  assert.is(removed.body.filter, null);
  await world.log(syncId, [{ id: 'b', kind: 'updated' }]);
  await until('everything again', () => receiver.accepted.length === 3);
  assert.equal(
    taken(receiver.accepted).map((e) => e.n),
    [1, 3, 5],
    'what was skipped meanwhile is not sent later',
  );
  const shown = await request(world.apiUrl, 'GET', `/api/syncs/${syncId}/webhooks/${webhook.id}`, { token: world.account.token });
  assert.is(shown.body.filter, null);
});

// ── bad input ─────────────────────────────────────────────────────────────

test('a filter naming an unknown kind or column, or past its bounds, is a 400 naming it, and nothing is made', async () => {
  const syncId = await world.newSync();
  const url = 'http://127.0.0.1:9/hook';
  const customer = [topic(syncId)];
  const many = (n: number, name = (i: number) => `c${i}`) => Array.from({ length: n }, (_, i) => name(i));
  const cases: Array<[unknown, RegExp]> = [
    [{ events: ['created'] }, /filter\.events\.0: must be one of inserted, updated, deleted, read/],
    [{ events: [] }, /filter\.events: must list at least one kind/],
    [{ changed: [] }, /filter\.changed: must list at least one column/],
    [{ where: {} }, /filter\.where: must have at least one condition/],
    [{}, /filter: must have events, changed or where/],
    [{ events: ['inserted'], when: 'now' }, /Unrecognized key\(s\) in object: 'when'/],
    [{ changed: ['emial'] }, /filter: column "emial" is in none of the webhook's collections \(customer\)/],
    [{ where: { total: 5 } }, /filter: column "total" is in none of the webhook's collections \(customer\)/],
    [{ where: { status: { gt: 1 } } }, /filter\.where\.status: must be a value \(equals\), or \{"eq": value\}/],
    [{ where: { status: { not_null: false } } }, /filter\.where\.status/],
    [{ where: { status: [1, 2] } }, /filter\.where\.status: must be a value/],
    [{ where: { status: { in: [] } } }, /filter\.where\.status\.in: must list at least one value/],
    [{ where: { status: { in: many(101) } } }, /filter\.where\.status\.in: must list at most 100 values/],
    [{ changed: many(51) }, /filter\.changed: must list at most 50 columns/],
    [{ where: Object.fromEntries(many(51).map((c) => [c, 1])) }, /filter\.where: must have at most 50 conditions/],
    [{ changed: ['x'.repeat(64)] }, /filter\.changed\.0: must be a column name \(at most 63 characters\)/],
    // Each part within its bounds, the whole past them: 50 columns of 100 values of 1,000 characters would be 5 MB.
    [{ where: { status: { in: many(20, (i) => `${i}`.padEnd(1000, 'v')) } } }, /filter: must be at most 16 KiB as JSON/],
  ];
  for (const [filter, message] of cases) {
    const answer = await request(world.apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: world.account.token,
      body: { url, topics: customer, filter },
    });
    assert.is(answer.status, 400, `${JSON.stringify(filter).slice(0, 80)}: ${answer.text}`);
    assert.match(answer.body.error.message, message);
  }
  const bad = [
    [{ max_per_second: 0 }, /max_per_second: must be from 1 to 10000/],
    [{ max_per_second: 10_001 }, /max_per_second: must be from 1 to 10000/],
    [{ max_per_second: 2.5 }, /max_per_second: must be a whole number/],
  ] as const;
  for (const [extra, message] of bad) {
    const answer = await request(world.apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: world.account.token,
      body: { url, topics: customer, ...extra },
    });
    assert.is(answer.status, 400, answer.text);
    assert.match(answer.body.error.message, message);
  }
  const listed = await request(world.apiUrl, 'GET', `/api/syncs/${syncId}/webhooks`, { token: world.account.token });
  assert.equal(listed.body.data, [], 'nothing half-made');

  // A column of another collection is fine once that collection is one of the topics.
  const both = await request(world.apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: world.account.token,
    body: { url, topics: [...customer, topic(syncId, 'invoice')], filter: { where: { total: { not_null: true } }, changed: ['email'] }, max_per_second: 50 },
  });
  assert.is(both.status, 201, both.text);
  assert.is(both.body.max_per_second, 50);
  const route = `/api/syncs/${syncId}/webhooks/${both.body.id}`;
  // Dropping the invoice topic would leave the filter's `total` unknown.
  const narrowed = await request(world.apiUrl, 'PATCH', route, { token: world.account.token, body: { topics: customer } });
  assert.is(narrowed.status, 400, narrowed.text);
  assert.match(narrowed.body.error.message, /column "total" is in none of the webhook's collections \(customer\)/);
  const patches: Array<[unknown, RegExp]> = [
    [{ enabled: 'yes' }, /enabled: must be true or false/],
    [{ enabled: null }, /enabled: must be true or false/],
    [{ secret: 'mine' }, /Unrecognized key\(s\) in object: 'secret'/],
    [{}, /give at least one of enabled, filter, max_per_second, url, topics/],
    [{ filter: { changed: ['nope'] } }, /column "nope" is in none/],
    [{ topics: [`svc.${syncId}.`] }, /topics\.0: must name a collection/],
    [{ url: 'ftp://x/y' }, /url: must be http:\/\/ or https:\/\//],
  ];
  for (const [body, message] of patches) {
    const answer = await request(world.apiUrl, 'PATCH', route, { token: world.account.token, body });
    assert.is(answer.status, 400, `${JSON.stringify(body)}: ${answer.text}`);
    assert.match(answer.body.error.message, message);
  }
  const unchanged = await request(world.apiUrl, 'GET', route, { token: world.account.token });
  assert.equal(unchanged.body.topics, [...customer, topic(syncId, 'invoice')]);
  assert.equal(unchanged.body.filter, { changed: ['email'], where: { total: { not_null: true } } });
  assert.is(unchanged.body.state, 'enabled');
  const gone = await request(world.apiUrl, 'PATCH', `/api/syncs/${syncId}/webhooks/wh_nope`, { token: world.account.token, body: { enabled: false } });
  assert.is(gone.status, 404);
});

test.run();
