/**
 * A hostile tenant at the API's edges: NUL bytes in bodies, paths and queries, ids past the
 * bigint range, webhook destinations in IPv6's special-purpose blocks, and another account's
 * id in a query. Each was a bare 500 or a silent pass; each must be a clear 4xx.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { nonPublicKind } from '../src/http/address.ts';
import { airtableSyncBody, createAccount, type HttpAnswer, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let alice: TestAccount;
let bob: TestAccount;
let syncId: string;

test.before(async () => {
  svc = await startTestService();
  alice = await createAccount(svc, 'alice');
  bob = await createAccount(svc, 'bob');
  const created = await request(svc.api, 'POST', '/api/syncs', { token: alice.token, body: airtableSyncBody() });
  assert.is(created.status, 201, created.text);
  syncId = created.body.id;
});
test.after(async () => svc.stop());

function refused(answer: HttpAnswer, status: number, what: string, message?: RegExp): void {
  assert.is(answer.status, status, `${what}: ${answer.text}`);
  assert.type(answer.body?.error?.message, 'string', `${what}: an error message`);
  if (message) assert.match(answer.body.error.message, message, what);
}

test('a NUL character in a JSON string or key is a 400 that names where, not a 500', async () => {
  refused(await request(svc.api, 'POST', '/api/accounts', { token: svc.adminToken, body: { name: 'a\u0000b' } }), 400, 'account name', /name: .*NUL/);
  refused(
    await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: alice.token,
      body: { url: 'https://93.184.216.34/a\u0000b', topics: [`svc.${syncId}.table_a`] },
    }),
    400,
    'webhook url',
    /url: .*NUL/,
  );
  refused(await request(svc.api, 'PATCH', `/api/syncs/${syncId}`, { token: alice.token, body: { settings: { 'lookup\u0000as': 'x' } } }), 400, 'a key', /NUL/);
  assert.ok(!svc.logs.text.includes('"level":50'), 'nothing was logged as an error');
});

test('a NUL byte in a path id or a query is a 400, not a 500', async () => {
  for (const route of [`/api/syncs/${syncId}%00`, '/api/wait/syn_%00', `/api/syncs?account_id=%00`, `/api/syncs/${syncId}/webhooks/wh_%00`]) {
    refused(await request(svc.api, 'GET', route, { token: alice.token }), 400, route, /NUL/);
  }
  refused(await request(svc.api, 'GET', '/api/accounts?x=%00', { token: svc.adminToken }), 400, 'admin query', /NUL/);
});

test('the event REST interface refuses NUL bytes too, in its paths and its bodies', async () => {
  const rest = `http://127.0.0.1:${svc.service.eventsPort}`;
  const auth = `Basic ${Buffer.from(`${alice.eventsUsername}:${alice.eventsPassword}`).toString('base64')}`;
  const consume = await fetch(`${rest}/consume/g%00/i/svc.${syncId}.table_a`, { headers: { authorization: auth } });
  const text = await consume.text();
  assert.is(consume.status, 400, text);
  assert.match(text, /NUL/);
  const fetched = await fetch(`${rest}/fetch`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify({ topic: `svc.${syncId}.a\u0000b`, partition: 0, offset: 0 }),
  });
  assert.is(fetched.status, 400, await fetched.text());
});

test('a JSON body nested past 64 levels is a 400, not a 500, on the API and the event REST interface', async () => {
  const deep = `${'['.repeat(400_000)}${']'.repeat(400_000)}`;
  const answer = await fetch(`${svc.api}/api/accounts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${svc.adminToken}`, 'content-type': 'application/json' },
    body: deep,
  });
  const text = await answer.text();
  assert.is(answer.status, 400, text);
  assert.match(text, /nested deeper than 64 levels/);
  const rest = `http://127.0.0.1:${svc.service.eventsPort}`;
  const auth = `Basic ${Buffer.from(`${alice.eventsUsername}:${alice.eventsPassword}`).toString('base64')}`;
  // Within the interface's 64 KiB, and past what a recursive walk's stack holds.
  const deepSmall = `${'['.repeat(30_000)}${']'.repeat(30_000)}`;
  const fetched = await fetch(`${rest}/fetch`, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: deepSmall });
  const restText = await fetched.text();
  assert.is(fetched.status, 400, restText);
  assert.match(restText, /nested deeper than 64 levels/);
  // A body as deep as the limit still reaches its route (which then judges its shape).
  const atLimit = `{"name":${'['.repeat(63)}"x"${']'.repeat(63)}}`;
  const shallow = await request(svc.api, 'POST', '/api/accounts', { token: svc.adminToken, raw: atLimit, headers: { 'content-type': 'application/json' } });
  assert.is(shallow.status, 400, shallow.text);
  assert.match(shallow.body.error.message, /^name: /);
  assert.ok(!svc.logs.text.includes('"level":50'), 'nothing was logged as an error');
});

test('a delivery id past the bigint range is a 400, not a 500', async () => {
  const hook = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
    token: alice.token,
    body: { url: 'https://93.184.216.34/hook', topics: [`svc.${syncId}.table_a`] },
  });
  assert.is(hook.status, 201, hook.text);
  const replay = (ids: string[]) =>
    request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks/${hook.body.id}/deliveries/replay`, { token: alice.token, body: { ids } });
  refused(await replay(['9999999999999999999']), 400, '19 digits past the range', /ids\.0: must be a delivery id/);
  const twenty = await replay(['99999999999999999999']);
  refused(twenty, 400, '20 digits', /ids\.0: must be a delivery id/);
  assert.is(twenty.body.error.message.split('must be a delivery id').length, 2, `said once: ${twenty.body.error.message}`);
  // The largest bigint is a valid id (it names no delivery).
  assert.is((await replay(['9223372036854775807'])).status < 500, true);
  // A page of deliveries after an id: the same range.
  const list = (after: string) => request(svc.api, 'GET', `/api/syncs/${syncId}/webhooks/${hook.body.id}/deliveries?after=${after}`, { token: alice.token });
  refused(await list('9223372036854775808'), 400, 'after, one past the range', /after: must be a delivery id/);
  refused(await list('9999999999999999999'), 400, 'after, 19 nines', /after: must be a delivery id/);
  assert.is((await list('9223372036854775807')).status, 200);
  assert.is((await list('0')).status, 200);
  assert.ok(!svc.logs.text.includes('"level":50'), 'nothing was logged as an error');
});

test("webhook destinations in IPv6's special-purpose blocks are refused", async () => {
  const blocked = [
    '::ffff:0:7f00:1', // IPv4-translated 127.0.0.1
    '::ffff:0:a00:1', // IPv4-translated 10.0.0.1
    '2001::1', // Teredo
    '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
    '2001:2::1', // benchmarking
    '2001:10::1', // deprecated ORCHID
    '5f00::1', // segment routing
    '3fff::1', // documentation (2024)
    '64:ff9b:1::1', // local-use NAT64
    '100::1', // discard
  ];
  for (const address of blocked) assert.ok(nonPublicKind(address), `${address} should not be public`);
  for (const address of ['2606:4700::1111', '2a00:1450:4001::1', '64:ff9b::808:808', '::ffff:0:808:808'])
    assert.is(nonPublicKind(address), undefined, `${address} is public`);
  for (const address of ['::ffff:0:7f00:1', '2001::1', '5f00::1', '3fff::1']) {
    const answer = await request(svc.api, 'POST', `/api/syncs/${syncId}/webhooks`, {
      token: alice.token,
      body: { url: `http://[${address}]/hook`, topics: [`svc.${syncId}.table_a`] },
    });
    refused(answer, 422, address, /webhook destinations must be public/);
  }
});

test("an account token naming another account's id in ?account_id= is a 403, as on create", async () => {
  refused(await request(svc.api, 'GET', `/api/syncs?account_id=${alice.id}`, { token: bob.token }), 403, "bob asks for alice's syncs");
  const own = await request(svc.api, 'GET', `/api/syncs?account_id=${alice.id}`, { token: alice.token });
  assert.is(own.status, 200, own.text);
  assert.equal(
    own.body.data.map((s: { id: string }) => s.id),
    [syncId],
  );
  const admin = await request(svc.api, 'GET', `/api/syncs?account_id=${bob.id}`, { token: svc.adminToken });
  assert.equal(admin.body.data, []);
});

test.run();
