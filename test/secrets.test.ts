import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import pg from 'pg';
import { createLogger } from '../src/log.ts';
import { Secret, SecretBox } from '../src/control/secrets.ts';
import { newSecretKey } from '../src/ids.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { airtableSyncBody, createAccount, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let svc: TestService;
/** Every secret the service was handed or made, to be searched for afterwards. */
const secrets: Array<[string, string]> = [];
const answersAfterCreation: string[] = [];

test.before(async () => {
  svc = await startTestService();
  const account = await createAccount(svc, 'secretive');
  secrets.push(['account api token', account.token], ['events password', account.eventsPassword]);
  const airtable = airtableSyncBody();
  const stripe = { ...stripeSyncBody(), api_key: 'sk_test_secretStripeKey4242424242' };
  secrets.push(['airtable key', airtable.api_key], ['stripe key', stripe.api_key]);
  const a = (await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: airtable })).body;
  const s = (await request(svc.api, 'POST', '/api/syncs', { token: account.token, body: stripe })).body;
  for (const sync of [a, s]) secrets.push([`reader password of ${sync.id}`, decodeURIComponent(new URL(sync.database.url).password)]);

  // Every answer after creation that the contract does not define as carrying a secret.
  for (const route of ['/api/syncs', `/api/syncs/${a.id}`, `/api/syncs/${s.id}`]) {
    answersAfterCreation.push((await request(svc.api, 'GET', route, { token: account.token })).text);
  }
  answersAfterCreation.push((await request(svc.api, 'GET', '/api/accounts', { token: svc.adminToken })).text);
  answersAfterCreation.push((await request(svc.api, 'PATCH', `/api/syncs/${a.id}`, { token: account.token, body: { settings: { turbo: true } } })).text);
  answersAfterCreation.push((await request(svc.api, 'DELETE', `/api/syncs/${s.id}`, { token: account.token })).text);
});
test.after(async () => svc.stop());

test('no secret is stored in plain text in the control database', async () => {
  const tables = await query<{ name: string }>(
    svc.controlUrl,
    "SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
  );
  assert.ok(tables.some((t) => t.name === 'public.syncs'));
  let dump = '';
  for (const { name } of tables) dump += JSON.stringify(await query(svc.controlUrl, `SELECT * FROM ${name}`));
  assert.ok(dump.includes('v1:'), 'sealed values are there');
  for (const [what, value] of secrets) assert.not.ok(dump.includes(value), `${what} found in the control database`);
});

test('no secret appears in any log line', async () => {
  assert.ok(svc.logs.lines.length > 5, 'the service logged (at debug level)');
  for (const [what, value] of secrets) assert.not.ok(svc.logs.text.includes(value), `${what} found in the log`);
});

test('a database error logs as a fact, not with the live client node-postgres hangs on it', async () => {
  // Seen in a test log: an idle connection's error carried its pg client, a few KB of driver
  // state (statement texts, type tables) in every such line.
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = createLogger({ level: 'info', destination: sink });
  const pool = new pg.Pool({ connectionString: serverAdminUrl(), max: 1 });
  const failed = new Promise<Error>((resolve) => pool.once('error', resolve));
  const client = await pool.connect();
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  client.release();
  await query(serverAdminUrl(), 'SELECT pg_terminate_backend($1)', [pid]);
  const error = await failed;
  assert.ok('client' in error, 'node-postgres still attaches its client (else this test proves nothing)');
  logger.warn({ err: error }, 'idle connection failed');
  await pool.end();
  const logged = JSON.parse(lines[0]!);
  assert.is(logged.err.code, '57P01');
  assert.match(logged.err.message, /terminating connection/);
  assert.not.ok('client' in logged.err, Object.keys(logged.err).join(', '));
  assert.ok(lines[0]!.length < 4_000, `${lines[0]!.length} characters`);
  // Not an error (no message): logged as given, and the caller's object left as it was.
  const notAnError = { client: 'kept', code: 7 };
  logger.warn({ err: notAnError }, 'odd');
  assert.equal(notAnError, { client: 'kept', code: 7 });
  assert.equal(JSON.parse(lines[1]!).err, { client: 'kept', code: 7 });
});

test('no upstream key or token comes back after creation', async () => {
  const text = answersAfterCreation.join('\n');
  for (const [what, value] of secrets) {
    if (what.startsWith('reader password')) continue; // database.url carries it, as the contract says
    assert.not.ok(text.includes(value), `${what} found in an API answer`);
  }
  assert.not.match(text, /api_key|api_token/);
});

test('sealed values are bound to their row and need the key', () => {
  const box = new SecretBox(newSecretKey());
  const sealed = box.encrypt('sk_test_abc', 'syncs:syn_1:api_key');
  assert.is(box.decrypt(sealed, 'syncs:syn_1:api_key').reveal(), 'sk_test_abc');
  assert.throws(() => box.decrypt(sealed, 'syncs:syn_2:api_key'), /could not be decrypted/);
  assert.throws(() => new SecretBox(newSecretKey()).decrypt(sealed, 'syncs:syn_1:api_key'), /could not be decrypted/);
  assert.is.not(box.encrypt('same', 'x'), box.encrypt('same', 'x'), 'a fresh nonce each time');
  assert.throws(() => SecretBox.fromBase64('c2hvcnQ='), /32 bytes/);
});

test('a Secret never prints its value', () => {
  const secret = new Secret('pat_hidden');
  assert.is(`${secret}`, '[secret]');
  assert.is(JSON.stringify({ secret }), '{"secret":"[secret]"}');
  assert.not.match(inspect({ secret }), /pat_hidden/);
  assert.is(secret.reveal(), 'pat_hidden');
});

test.run();
