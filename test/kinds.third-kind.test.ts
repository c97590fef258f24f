/**
 * The source-kind seam: a third kind, defined under test/kinds/notes/ (a small JSON-over-HTTP
 * upstream), registered beside the built-in ones. With no edit anywhere else it is created
 * through the API, syncs, emits events, is listed by the console, takes a write through the
 * proxy that a read right after sees, and answers the wait endpoint.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { builtInKinds } from '../src/kinds/built-in.ts';
import { NOTES_HOST, notesKind } from './kinds/notes/kind.ts';
import { NotesUpstream } from './kinds/notes/upstream.ts';
import { query } from './harness/postgres.ts';
import { sourceFiles, waitFor } from './harness/process.ts';
import { createAccount, loudSetUp, request, startTestService, type TestAccount, type TestService, waitOk } from './harness/service.ts';

const KEY = 'nk_thirdkind01';
let upstream: NotesUpstream;
let svc: TestService;
let account: TestAccount;

test.before(
  loudSetUp(
    async () => {
      upstream = new NotesUpstream(KEY);
      await upstream.start();
      const kinds = builtInKinds();
      kinds.register(notesKind);
      svc = await startTestService({
        kinds,
        config: { roles: ['api', 'sync', 'decoder', 'proxy', 'events'], upstreams: new Map([[NOTES_HOST, upstream.url]]) },
        tunables: { workerTickMs: 250 },
      });
      account = await createAccount(svc);
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await upstream?.stop();
});

async function eventsOf(syncId: string) {
  const rows = await query<{ topic: string; value: string }>(svc.controlUrl, 'SELECT topic, value FROM events WHERE sync_id = $1 ORDER BY seq', [syncId]);
  return rows.map((r) => ({ topic: r.topic, ...(JSON.parse(r.value) as { id: string; event: string; collection: string; data: { text: string } }) }));
}

test('a kind registered from outside the product syncs, emits events, proxies a write and answers the wait endpoint', async () => {
  const first = upstream.write(undefined, 'written before the sync');
  const created = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'notes', api_key: KEY } });
  assert.is(created.status, 201, created.text);
  const syncId: string = created.body.id;
  const reader: string = created.body.database.url;

  // Sync, and the wait endpoint.
  await waitOk(svc, account.token, syncId, 30_000);
  assert.equal(await query(reader, 'SELECT id, text FROM notes'), [{ id: first.id, text: 'written before the sync' }]);
  upstream.write(first.id, 'changed straight upstream');
  await waitOk(svc, account.token, syncId, 30_000);
  assert.equal(await query(reader, 'SELECT text FROM notes WHERE id = $1', [first.id]), [{ text: 'changed straight upstream' }]);

  // A write through the proxy is in the database when the answer comes.
  const proxied = await fetch(`http://127.0.0.1:${svc.service.proxyPort}/${NOTES_HOST}/v1/notes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'through the proxy' }),
  });
  assert.is(proxied.status, 200);
  const note = (await proxied.json()) as { id: string };
  assert.equal(await query(reader, 'SELECT text FROM notes WHERE id = $1', [note.id]), [{ text: 'through the proxy' }]);

  // Events, under the kind's collection, with the prior value of what changed.
  const events = await waitFor(
    'the three changes as events',
    async () => {
      const list = await eventsOf(syncId);
      return list.length >= 3 ? list : undefined;
    },
    20_000,
  );
  assert.equal(
    events.map((e) => [e.event, e.collection, e.topic, e.data.text]),
    [
      ['inserted', 'note', `svc.${syncId}.note`, 'written before the sync'],
      ['updated', 'note', `svc.${syncId}.note`, 'changed straight upstream'],
      ['inserted', 'note', `svc.${syncId}.note`, 'through the proxy'],
    ],
  );

  // The console lists the kind's table under its upstream name and topic.
  const tables = await request(svc.api, 'GET', `/api/syncs/${syncId}/tables`, { token: account.token });
  assert.is(tables.status, 200, tables.text);
  const listed = (tables.body.data as Array<{ name: string; upstream_name: string; topic: string }>).find((t) => t.name === 'notes');
  assert.equal(listed && { upstream_name: listed.upstream_name, topic: listed.topic }, { upstream_name: 'Notes', topic: `svc.${syncId}.note` });

  // Its settings, its key check and its one sync per account come from the kind too.
  assert.is((await request(svc.api, 'PATCH', `/api/syncs/${syncId}`, { token: account.token, body: { settings: { poll: false } } })).status, 200);
  const second = await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'notes', api_key: KEY } });
  assert.is(second.status, 409, second.text);
  assert.match(second.body.error.message, /already syncs notes account notes-account/);
  const other = await createAccount(svc, 'other');
  const wrong = await request(svc.api, 'POST', '/api/syncs', { token: other.token, body: { kind: 'notes', api_key: 'nk_wrong' } });
  assert.is(wrong.status, 422, wrong.text);
  const unknown = await request(svc.api, 'POST', '/api/syncs', { token: other.token, body: { kind: 'dropbox', api_key: 'x' } });
  assert.match(unknown.body.error.message, /kind: must be one of airtable, stripe, notes/);
});

test('the product does not know the third kind: nothing under src/ names it', async () => {
  const named = (await sourceFiles('src', /\.(ts|js)$/)).filter(({ text }) => /api\.notes\.test|notesKind/.test(text)).map(({ file }) => file);
  assert.equal(named, []);
});

test.run();
