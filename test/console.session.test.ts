/**
 * The console's server side, over HTTP: sign-in sessions (cookie flags, CSRF, cross-origin
 * refusals, isolation between accounts, sign-out), the static files, and the read-only
 * routes its pages use (tables, history, connection, event credentials).
 */
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../src/config.ts';
import { hashToken } from '../src/control/secrets.ts';
import { waitForCycle } from './harness/airtable.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestAccount, type TestService } from './harness/service.ts';

let svc: TestService;
let alice: TestAccount;
let bob: TestAccount;
let aliceSync: string;
let bobSync: string;

test.before(async () => {
  svc = await startTestService({
    config: { roles: ['api', 'sync'] },
    tunables: { airtable: { pollIntervalMs: 250, cycleGapMs: 250 }, workerTickMs: 250 },
  });
  alice = await createAccount(svc, 'alice');
  bob = await createAccount(svc, 'bob');
  const base = svc.airtable.createBase({ name: 'Projects' });
  base.createTable('Project Tasks', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Points', type: 'number', options: { precision: 0 } },
  ]);
  base.createRecords('Project Tasks', [
    { Name: 'a', Points: 1 },
    { Name: 'b', Points: 2 },
  ]);
  const before = new Date();
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: alice.token,
    body: { kind: 'airtable', base_id: base.id, api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(created.status, 201, created.text);
  aliceSync = created.body.id;
  const other = await request(svc.api, 'POST', '/api/syncs', {
    token: bob.token,
    body: { kind: 'airtable', base_id: 'appBBBBBBBBBBBBBB', api_key: AIRTABLE_TEST_TOKEN },
  });
  assert.is(other.status, 201, other.text);
  bobSync = other.body.id;
  await waitForCycle(svc, alice.token, aliceSync, before);
});
test.after(async () => svc?.stop());

/** Signs in like the console does and returns the cookie pair and the CSRF token. */
async function signIn(token: string) {
  const answer = await request(svc.api, 'POST', '/console/session', { body: { token }, headers: { origin: svc.api, 'sec-fetch-site': 'same-origin' } });
  assert.is(answer.status, 200, answer.text);
  const setCookie = answer.headers.get('set-cookie') ?? '';
  const cookie = /^([^;]+)/.exec(setCookie)![1]!;
  return { cookie, csrf: answer.body.csrf_token as string, setCookie, body: answer.body };
}

const same = (cookie: string, extra: Record<string, string> = {}) => ({ cookie, origin: svc.api, 'sec-fetch-site': 'same-origin', ...extra });

test('sign-in sets an HttpOnly, SameSite=Strict, host-only cookie; only a hash of it is stored', async () => {
  const session = await signIn(alice.token);
  const flags = session.setCookie.toLowerCase();
  assert.match(session.cookie, /^tributary_session=[A-Za-z0-9_-]{43}$/);
  assert.ok(flags.includes('httponly'), session.setCookie);
  assert.ok(flags.includes('samesite=strict'), session.setCookie);
  assert.ok(flags.includes('path=/'), session.setCookie);
  assert.not.ok(flags.includes('domain='), 'host-only');
  assert.not.ok(flags.includes('secure'), 'plain http: no Secure flag (the browser would drop the cookie)');
  assert.equal(session.body.principal, { kind: 'account', account: { id: alice.id, name: 'alice', events_username: alice.eventsUsername } });
  const id = session.cookie.split('=')[1]!;
  const rows = await query<{ id_sha256: string }>(svc.controlUrl, 'SELECT id_sha256 FROM console_sessions');
  assert.ok(rows.some((r) => r.id_sha256 === hashToken(id)));
  assert.not.ok(JSON.stringify(rows).includes(id), 'the session id itself is not stored');
  const who = await request(svc.api, 'GET', '/console/session', { headers: same(session.cookie) });
  assert.is(who.status, 200);
  assert.is(who.body.csrf_token, session.csrf);
  assert.is(who.headers.get('cache-control'), 'no-store');
});

test('sign-in refuses bad tokens and bad bodies with a message', async () => {
  const bad = await request(svc.api, 'POST', '/console/session', { body: { token: 'trb_nope' } });
  assert.is(bad.status, 401);
  assert.match(bad.body.error.message, /not valid/);
  assert.is(bad.headers.get('set-cookie'), null);
  assert.is((await request(svc.api, 'POST', '/console/session', { body: { token: '' } })).status, 400);
  assert.is((await request(svc.api, 'POST', '/console/session', { body: { token: 'x', extra: 1 } })).status, 400);
  assert.is((await request(svc.api, 'POST', '/console/session', { raw: '{nope', headers: { 'content-type': 'application/json' } })).status, 400);
  assert.is((await request(svc.api, 'POST', '/console/session', { raw: 'token=x', headers: { 'content-type': 'text/plain' } })).status, 415);
  const elsewhere = await request(svc.api, 'POST', '/console/session', { body: { token: alice.token }, headers: { origin: 'http://evil.example' } });
  assert.is(elsewhere.status, 403, 'a sign-in posted from another origin is refused (login CSRF)');
  assert.is((await request(svc.api, 'GET', '/console/session')).status, 401);
});

test("a session sees only its account's data; another account's sync is a 404", async () => {
  const { cookie } = await signIn(alice.token);
  const list = await request(svc.api, 'GET', '/api/syncs', { headers: same(cookie) });
  assert.is(list.status, 200);
  assert.equal(
    list.body.data.map((s: { id: string }) => s.id),
    [aliceSync],
  );
  for (const route of [
    `/api/syncs/${bobSync}`,
    `/api/syncs/${bobSync}/tables`,
    `/api/syncs/${bobSync}/history`,
    `/api/syncs/${bobSync}/connection`,
    `/api/syncs/${bobSync}/webhooks`,
  ]) {
    const answer = await request(svc.api, 'GET', route, { headers: same(cookie) });
    assert.is(answer.status, 404, route);
    assert.not.ok(answer.text.includes(bob.eventsUsername), route);
  }
  assert.is((await request(svc.api, 'GET', '/api/accounts', { headers: same(cookie) })).status, 403, 'an account session is no operator');
  const creds = await request(svc.api, 'POST', `/api/syncs/${bobSync}/events-credentials`, {
    headers: same(cookie, { 'x-csrf-token': (await request(svc.api, 'GET', '/console/session', { headers: same(cookie) })).body.csrf_token }),
  });
  assert.is(creds.status, 404);
  assert.not.ok(creds.text.includes(bob.eventsPassword));
});

test('state-changing requests need the CSRF token and this origin; reads refuse other sites', async () => {
  const { cookie, csrf } = await signIn(alice.token);
  const patch = (headers: Record<string, string>) =>
    request(svc.api, 'PATCH', `/api/syncs/${aliceSync}`, { body: { settings: { turbo: true } }, headers: { cookie, ...headers } });
  const noToken = await patch({ origin: svc.api, 'sec-fetch-site': 'same-origin' });
  assert.is(noToken.status, 403);
  assert.match(noToken.body.error.message, /CSRF/);
  assert.is((await patch({ origin: svc.api, 'x-csrf-token': 'wrong' })).status, 403);
  assert.is((await patch({ origin: 'http://evil.example', 'x-csrf-token': csrf })).status, 403, 'another origin');
  assert.is((await patch({ 'sec-fetch-site': 'cross-site', 'x-csrf-token': csrf })).status, 403, 'another site');
  assert.is((await patch({ 'sec-fetch-site': 'same-site', 'x-csrf-token': csrf })).status, 403, 'another port of this host');
  const ok = await patch({ origin: svc.api, 'sec-fetch-site': 'same-origin', 'x-csrf-token': csrf });
  assert.is(ok.status, 200, ok.text);
  assert.is(ok.body.settings.turbo, true);
  await patch({ origin: svc.api, 'x-csrf-token': csrf }); // no Sec-Fetch-Site (older browsers): Origin suffices

  const crossRead = await request(svc.api, 'GET', '/api/syncs', { headers: { cookie, 'sec-fetch-site': 'cross-site' } });
  assert.is(crossRead.status, 403);
  const typed = await request(svc.api, 'GET', '/api/syncs', { headers: { cookie, 'sec-fetch-site': 'none' } });
  assert.is(typed.status, 200, 'a URL typed into the address bar may read');
  const reset = await patch({ origin: svc.api, 'x-csrf-token': csrf });
  assert.is(reset.status, 200);
  await request(svc.api, 'PATCH', `/api/syncs/${aliceSync}`, { token: alice.token, body: { settings: { turbo: false } } });
});

test('a Bearer token wins over a cookie: a session never lends its account to another token', async () => {
  const { cookie } = await signIn(alice.token);
  const asBob = await request(svc.api, 'GET', '/api/syncs', { token: bob.token, headers: { cookie } });
  assert.equal(
    asBob.body.data.map((s: { id: string }) => s.id),
    [bobSync],
  );
  const badBearer = await request(svc.api, 'GET', '/api/syncs', { token: 'trb_bad', headers: { cookie } });
  assert.is(badBearer.status, 401);
});

test('the operator session sees every account; sign-out ends a session for good', async () => {
  const admin = await signIn(svc.adminToken);
  assert.equal(admin.body.principal, { kind: 'admin' });
  const list = await request(svc.api, 'GET', '/api/syncs', { headers: same(admin.cookie) });
  assert.equal(new Set(list.body.data.map((s: { id: string }) => s.id)), new Set([aliceSync, bobSync]));
  assert.is((await request(svc.api, 'GET', '/api/accounts', { headers: same(admin.cookie) })).status, 200);

  const refused = await request(svc.api, 'DELETE', '/console/session', { headers: same(admin.cookie) });
  assert.is(refused.status, 403, 'signing out needs the CSRF token too');
  const out = await request(svc.api, 'DELETE', '/console/session', { headers: same(admin.cookie, { 'x-csrf-token': admin.csrf }) });
  assert.is(out.status, 200);
  assert.match(out.headers.get('set-cookie') ?? '', /tributary_session=;.*expires=Thu, 01 Jan 1970/i);
  const after = await request(svc.api, 'GET', '/api/syncs', { headers: same(admin.cookie) });
  assert.is(after.status, 401);
  assert.match(after.body.error.message, /sign in again/);
  assert.is((await request(svc.api, 'GET', '/console/session', { headers: same(admin.cookie) })).status, 401);
});

test('an operator session ends when the admin token changes; expired sessions are refused', async () => {
  const admin = await signIn(svc.adminToken);
  await query(svc.controlUrl, "UPDATE console_sessions SET admin_token_sha256 = 'rotated' WHERE account_id IS NULL");
  assert.is((await request(svc.api, 'GET', '/api/syncs', { headers: same(admin.cookie) })).status, 401);
  const user = await signIn(alice.token);
  await query(svc.controlUrl, "UPDATE console_sessions SET expires_at = now() - interval '1 second' WHERE account_id = $1", [alice.id]);
  assert.is((await request(svc.api, 'GET', '/api/syncs', { headers: same(user.cookie) })).status, 401);
});

test('behind an https reverse proxy (TRIBUTARY_PUBLIC_URL): same-origin means the public origin, the cookie is Secure and __Host-', async () => {
  assert.throws(() => loadConfig({ TRIBUTARY_PUBLIC_URL: 'ftp://console.example.com' }), /TRIBUTARY_PUBLIC_URL must be an http:\/\/ or https:\/\/ URL/);
  assert.throws(() => loadConfig({ TRIBUTARY_PUBLIC_URL: 'https://console.example.com/app' }), /without a path/);
  const publicOrigin = loadConfig({ TRIBUTARY_PUBLIC_URL: 'https://console.example.com/' }).publicOrigin!;
  assert.is(publicOrigin, 'https://console.example.com');
  const proxied = await startTestService({ config: { roles: ['api'], publicOrigin } });
  try {
    const signIn = (origin: string) =>
      request(proxied.api, 'POST', '/console/session', { body: { token: proxied.adminToken }, headers: { origin, 'sec-fetch-site': 'same-origin' } });
    const direct = await signIn(proxied.api);
    assert.is(direct.status, 403, 'the server’s own address is another origin now');
    const answer = await signIn(publicOrigin);
    assert.is(answer.status, 200, answer.text);
    const setCookie = answer.headers.get('set-cookie') ?? '';
    assert.match(setCookie, /^__Host-tributary_session=[^;]+/);
    for (const flag of [/; secure/i, /; httponly/i, /; samesite=strict/i, /; path=\//i]) assert.match(setCookie, flag);
    assert.not.match(setCookie, /domain=/i);
    const cookie = /^([^;]+)/.exec(setCookie)![1]!;
    const read = await request(proxied.api, 'GET', '/api/accounts', { headers: { cookie, origin: publicOrigin, 'sec-fetch-site': 'same-origin' } });
    assert.is(read.status, 200, read.text);
    // Under https only the __Host- cookie counts: the unprefixed name can be planted by a
    // sibling host or over plain http, which __Host- rules out.
    const planted = cookie.replace(/^__Host-/, '');
    const refused = await request(proxied.api, 'GET', '/api/accounts', { headers: { cookie: planted, origin: publicOrigin, 'sec-fetch-site': 'same-origin' } });
    assert.is(refused.status, 401, refused.text);
  } finally {
    await proxied.stop();
  }
});

test('the console is served from / with a strict content policy, small when gzipped', async () => {
  const page = await fetch(`${svc.api}/`, { headers: { 'accept-encoding': 'gzip' } });
  assert.is(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /text\/html/);
  assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  assert.is(page.headers.get('x-content-type-options'), 'nosniff');
  const html = await page.text();
  const assets = [...html.matchAll(/(?:href|src)="(\/console\/[^"]+)"/g)].map((m) => m[1]!);
  assert.ok(assets.includes('/console/app.js') && assets.includes('/console/console.css'), assets.join(' '));
  let gzipped = gzipSync(html).length;
  for (const asset of new Set(assets)) {
    const answer = await fetch(svc.api + asset);
    assert.is(answer.status, 200, asset);
    gzipped += gzipSync(Buffer.from(await answer.arrayBuffer())).length;
  }
  assert.ok(gzipped < 150 * 1024, `the console is ${gzipped} bytes gzipped`);
  process.stdout.write(`console: ${new Set(assets).size} files, ${(gzipped / 1024).toFixed(1)} kB gzipped\n`);
  const etag = page.headers.get('etag')!;
  assert.is((await fetch(`${svc.api}/`, { headers: { 'if-none-match': etag } })).status, 304);
  const missing = await request(svc.api, 'GET', '/console/nope.js');
  assert.is(missing.status, 404);
  assert.is(missing.body.error.code, 'not_found');
  assert.is((await request(svc.api, 'GET', '/console/../package.json')).status, 404);
  assert.is((await request(svc.api, 'GET', '/console/%2e%2e/package.json')).status, 404);
});

test("the console's read-only routes: tables with upstream names, history, connection, event credentials", async () => {
  const tables = await request(svc.api, 'GET', `/api/syncs/${aliceSync}/tables`, { token: alice.token });
  assert.is(tables.status, 200, tables.text);
  assert.equal(
    tables.body.data.map((t: { name: string; upstream_name: string; rows: number; topic: string }) => [t.name, t.upstream_name, t.rows, t.topic]),
    [['project_tasks', 'Project Tasks', 2, `svc.${aliceSync}.project_tasks`]],
  );
  assert.ok(tables.body.sync_meta.completed_at, 'the _sync_meta times');

  const history = await waitFor(
    'a cycle sample',
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${aliceSync}/history?hours=1`, { token: alice.token });
      return answer.body.cycles.length > 0 ? answer.body : undefined;
    },
    10_000,
  );
  // Lag as the status counts it (change capture's passes too), so it may be below the cycle's time.
  assert.ok(history.cycles[0].lag_seconds >= 0 && history.cycles[0].duration_seconds >= 0, JSON.stringify(history.cycles[0]));
  assert.ok(history.cycles[0].cycles >= 1, JSON.stringify(history.cycles[0]));
  assert.is((await request(svc.api, 'GET', `/api/syncs/${aliceSync}/history?hours=99`, { token: alice.token })).status, 400);

  const connection = await request(svc.api, 'GET', `/api/syncs/${aliceSync}/connection`, { token: alice.token });
  assert.is(connection.body.wait_url, `${svc.api}/api/wait/${aliceSync}`);
  // From the configuration, never from the request: a forged Host changes nothing (fetch
  // cannot send one, node:http can).
  const forged = await new Promise<string>((resolve, reject) => {
    const url = new URL(`${svc.api}/api/syncs/${aliceSync}/connection`);
    http
      .get(url, { headers: { host: 'evil.example', authorization: `Bearer ${alice.token}` } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  assert.is((JSON.parse(forged) as { wait_url: string }).wait_url, `${svc.api}/api/wait/${aliceSync}`, forged);
  assert.is(connection.body.events.username, alice.eventsUsername);
  assert.ok(connection.body.events.topics.includes(`svc.${aliceSync}.project_tasks`));
  assert.not.ok(connection.text.includes(alice.eventsPassword), 'the password only on request');

  const creds = await request(svc.api, 'POST', `/api/syncs/${aliceSync}/events-credentials`, { token: alice.token });
  assert.equal(creds.body, { username: alice.eventsUsername, password: alice.eventsPassword });
  assert.is(creds.headers.get('cache-control'), 'no-store');
  assert.not.ok(svc.logs.text.includes(alice.eventsPassword), 'never logged');
});

test('failed cycles are kept as recent errors', async () => {
  const base = svc.airtable.createBase({ name: 'Doomed' });
  base.createTable('T', [{ name: 'Name', type: 'singleLineText' }]);
  const key = `patDOOMEDXXXXXXXX.${'ab'.repeat(32)}`;
  svc.airtable.addToken(key, { bases: '*' });
  const created = await request(svc.api, 'POST', '/api/syncs', { token: alice.token, body: { kind: 'airtable', base_id: base.id, api_key: key } });
  assert.is(created.status, 201, created.text);
  svc.airtable.revokeToken(key);
  const errors = await waitFor(
    'a recorded error',
    async () => {
      const answer = await request(svc.api, 'GET', `/api/syncs/${created.body.id}/history`, { token: alice.token });
      return answer.body.errors.length > 0 ? answer.body.errors : undefined;
    },
    20_000,
  );
  assert.match(errors[0].message, /rejected|not authorized|invalid/i);
  assert.is(errors[0].kind, 'fatal');
});

test.run();
