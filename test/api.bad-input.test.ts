import http from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { airtableSyncBody, createAccount, request, startTestService, type HttpAnswer, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let account: TestAccount;
let syncId: string;

test.before(async () => {
  svc = await startTestService();
  account = await createAccount(svc);
  syncId = (await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: airtableSyncBody() })).body.id;
});
test.after(async () => svc.stop());

/** Every refusal is a 4xx with the API's error object; never a 500, never HTML. */
function assertClientError(answer: HttpAnswer, status: number, what: string): void {
  assert.is(answer.status, status, `${what}: ${answer.text}`);
  assert.type(answer.body?.error?.code, 'string', `${what}: error.code`);
  assert.type(answer.body?.error?.message, 'string', `${what}: error.message`);
  assert.not.match(answer.text, /at .*\.ts:\d+/, `${what}: no stack trace`);
}

const writeEndpoints = () => [
  { method: 'POST', route: '/api/accounts', admin: true },
  { method: 'POST', route: '/api/syncs', admin: false },
  { method: 'PATCH', route: `/api/syncs/${syncId}`, admin: false },
];
const readEndpoints = () => [
  { method: 'GET', route: '/api/accounts', admin: true },
  { method: 'GET', route: '/api/syncs', admin: false },
  { method: 'GET', route: `/api/syncs/${syncId}`, admin: false },
  { method: 'DELETE', route: `/api/syncs/${syncId}`, admin: false },
];
const tokenFor = (admin: boolean) => (admin ? svc.adminToken : account.token);

test('a missing, malformed or unknown token is 401 on every endpoint', async () => {
  for (const { method, route } of [...writeEndpoints(), ...readEndpoints()]) {
    assertClientError(await request(svc.api, method, route, { body: {} }), 401, `${method} ${route} without a token`);
    assertClientError(
      await request(svc.api, method, route, { headers: { authorization: 'Basic Zm9vOmJhcg==' }, body: {} }),
      401,
      `${method} ${route} with Basic auth`,
    );
    const wrong = await request(svc.api, method, route, { token: 'trb_notarealtoken', body: {} });
    assertClientError(wrong, 401, `${method} ${route} with an unknown token`);
    assert.is(wrong.headers.get('www-authenticate'), 'Bearer');
  }
});

test('malformed JSON, a non-object, and a wrong content type are refused', async () => {
  for (const { method, route, admin } of writeEndpoints()) {
    const token = tokenFor(admin);
    const headers = { 'content-type': 'application/json' };
    assertClientError(await request(svc.api, method, route, { token, raw: '{"name": ', headers }), 400, `${route} truncated JSON`);
    assertClientError(await request(svc.api, method, route, { token, raw: '[1,2]', headers }), 400, `${route} array`);
    assertClientError(await request(svc.api, method, route, { token, raw: '"text"', headers }), 400, `${route} string`);
    assertClientError(await request(svc.api, method, route, { token, raw: 'null', headers }), 400, `${route} null`);
    assertClientError(await request(svc.api, method, route, { token }), 400, `${route} no body`);
    assertClientError(await request(svc.api, method, route, { token, raw: 'name=x', headers: { 'content-type': 'text/plain' } }), 415, `${route} text/plain`);
  }
});

test('wrong types and unknown fields name the field', async () => {
  const cases: Array<[string, string, boolean, unknown, RegExp]> = [
    ['POST', '/api/accounts', true, { name: 42 }, /name/],
    ['POST', '/api/accounts', true, { name: '' }, /name/],
    ['POST', '/api/accounts', true, { name: 'x', admin: true }, /admin/],
    ['POST', '/api/syncs', false, { kind: 'dropbox', api_key: 'x' }, /kind/],
    ['POST', '/api/syncs', false, { ...airtableSyncBody(), base_id: 'base1' }, /base_id/],
    ['POST', '/api/syncs', false, { ...airtableSyncBody(), api_key: 7 }, /api_key/],
    ['POST', '/api/syncs', false, { ...airtableSyncBody(), settings: { turbo: 'yes' } }, /turbo/],
    ['POST', '/api/syncs', false, { ...airtableSyncBody(), settings: { surprise: 1 } }, /surprise/],
    ['POST', '/api/syncs', false, { ...airtableSyncBody(), database_url: 'mysql://x' }, /database_url/],
    ['POST', '/api/syncs', false, { ...airtableSyncBody(), extra: 1 }, /extra/],
    ['POST', '/api/syncs', false, { kind: 'stripe', api_key: 'pk_test_123' }, /api_key/],
    ['POST', '/api/syncs', false, { kind: 'stripe', api_key: 'sk_test_1', base_id: 'appAAAAAAAAAAAAAA' }, /base_id/],
    ['PATCH', `/api/syncs/{id}`, false, { settings: { debounce_ms: 1.5 } }, /debounce_ms/],
    ['PATCH', `/api/syncs/{id}`, false, { settings: { lookup_as: 'json' } }, /lookup_as/],
    ['PATCH', `/api/syncs/{id}`, false, { settings: 'turbo' }, /settings/],
    ['PATCH', `/api/syncs/{id}`, false, { turbo: true }, /turbo/],
  ];
  for (const [method, route, admin, body, field] of cases) {
    const answer = await request(svc.api, method, route.replace('{id}', syncId), { token: tokenFor(admin), body });
    assertClientError(answer, 400, `${method} ${route} ${JSON.stringify(body)}`);
    assert.match(answer.body.error.message, field, `${JSON.stringify(body)} names ${field}`);
  }
});

/** Sends a body in chunks with no Content-Length, so only the streaming limit can catch it. */
function sendChunked(method: string, route: string, token: string, bytes: number): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(svc.api + route, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: new Headers(), body: JSON.parse(text), text }));
    });
    // The server may close the socket right after its answer; only an error before it counts.
    let answered = false;
    req.on('response', () => (answered = true));
    req.on('error', (error) => answered || reject(error));
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let sent = 0;
    const pump = () => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end();
    };
    req.write('{"name":"');
    pump();
  });
}

test("a setting the sync's kind does not have is named, with the settings it has", async () => {
  const patched = await request(svc.api, 'PATCH', `/api/syncs/${syncId}`, { token: account.token, body: { settings: { connected_accounts: true } } });
  assertClientError(patched, 400, 'an Airtable sync with a Stripe setting');
  assert.is(
    patched.body.error.message,
    'settings.connected_accounts: not a setting of airtable syncs (their settings: turbo, debounce_ms, lookup_as, intelligent_cast, stable_attachment_links)',
  );
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'stripe', api_key: 'sk_test_51HxTestKey0000000000000', settings: { lookup_as: 'text', turbo: true } },
  });
  assertClientError(created, 400, 'a Stripe sync with an Airtable setting');
  assert.is(created.body.error.message, 'settings.lookup_as: not a setting of stripe syncs (their settings: turbo, connected_accounts)');
});

test('an oversize body is 413, declared or streamed', async () => {
  const big = JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) });
  const headers = { 'content-type': 'application/json' };
  for (const { method, route, admin } of writeEndpoints()) {
    const token = tokenFor(admin);
    assertClientError(await request(svc.api, method, route, { token, raw: big, headers }), 413, `${route} declared oversize`);
    const streamed = await sendChunked(method, route, token, 2 * 1024 * 1024);
    assertClientError(streamed, 413, `${route} streamed oversize`);
  }
});

test('unknown routes, unknown ids and wrong methods are 404 or 405', async () => {
  const token = account.token;
  assertClientError(await request(svc.api, 'GET', '/api/nothing', { token }), 404, 'unknown route');
  assertClientError(await request(svc.api, 'GET', '/nothing', {}), 404, 'unknown top-level path');
  assertClientError(await request(svc.api, 'GET', '/api/syncs/syn_doesnotexist00', { token }), 404, 'unknown sync');
  assertClientError(await request(svc.api, 'GET', '/api/syncs/%E0%A4%A', { token }), 404, 'bad escape');
  assertClientError(await request(svc.api, 'DELETE', `/api/syncs/${syncId}?keep_database=maybe`, { token }), 400, 'bad flag');
  const put = await request(svc.api, 'PUT', '/api/syncs', { token, body: {} });
  assertClientError(put, 405, 'PUT /api/syncs');
  assert.match(put.headers.get('allow') ?? '', /GET/);
});

test('the service is still healthy after all of it', async () => {
  const health = await request(svc.api, 'GET', '/healthz');
  assert.is(health.status, 200);
  assert.equal(health.body, { ok: true });
  assert.not.match(svc.logs.text, /"level":50/, 'no request was logged as an internal error');
});

test.run();
