/**
 * `database_url` was a probe of the service's network and file system: the connection error
 * came back verbatim (ECONNREFUSED for a closed port, "Connection terminated" for an HTTP
 * port, "password authentication failed" for the shared server), `sslrootcert=` read a file
 * path, `?host=` named a socket, and 169.254.169.254 and private ranges were dialled. Now the
 * URL is held to the webhook address policy, takes sslmode only, never names Tributary's own
 * servers, answers from a short fixed list, and is rate-limited per account. A name checked
 * public once may be pointed elsewhere later (DNS rebinding): every connection to a customer
 * server resolves the name itself and refuses non-public addresses.
 */
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectFailure } from '../src/control/server-url.ts';
import { publicOnly } from '../src/db/connect.ts';
import { withClient, withCredentials } from '../src/db/sql.ts';
import { freePort } from './harness/ports.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { sourceFiles } from './harness/process.ts';
import { createAccount, type HttpAnswer, request, startTestService, stripeSyncBody, type TestService } from './harness/service.ts';

let strict: TestService;
let lenient: TestService;
let web: http.Server;

test.before(async () => {
  strict = await startTestService();
  lenient = await startTestService({ config: { databaseAllowPrivate: true } });
  web = http.createServer((_req, res) => res.end('hello'));
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
});
test.after(async () => {
  await strict.stop();
  await lenient.stop();
  web.close();
});

const LEAKS = /ECONNREFUSED|ENOENT|ETIMEDOUT|terminated|password authentication|nonexistent|\/var\/run|no pg_hba/i;

async function create(svc: TestService, token: string, databaseUrl: string): Promise<HttpAnswer> {
  return request(svc.api, 'POST', '/api/syncs', { token, body: { ...stripeSyncBody(), database_url: databaseUrl } });
}

function refused(answer: HttpAnswer, status: number, message: RegExp, what: string): void {
  assert.is(answer.status, status, `${what}: ${answer.text}`);
  assert.match(answer.body.error.message, message, what);
  assert.not.match(answer.body.error.message, LEAKS, `${what}: echoes nothing from the attempt`);
}

test('the URL takes only postgres:// with a host and a port, and sslmode as its one parameter', async () => {
  const { token } = await createAccount(lenient, 'shapes');
  refused(
    await create(lenient, token, 'postgres://u:p@example.com:5432/db?sslrootcert=/etc/nonexistent-file'),
    400,
    /parameter sslrootcert is not accepted/,
    'sslrootcert',
  );
  refused(await create(lenient, token, 'postgres://u:p@example.com:5432/db?host=/var/run/postgresql'), 400, /parameter host is not accepted/, '?host=');
  refused(await create(lenient, token, 'postgres://u:p@%2Fvar%2Frun%2Fpostgresql:5432/db'), 400, /socket paths are not accepted/, 'a socket path');
  refused(await create(lenient, token, 'postgres://u:p@example.com/db'), 400, /must name the port/, 'no port');
  assert.is(lenient.logs.text.includes('nonexistent-file'), false, 'nothing was tried with the file');
});

test('loopback, private and link-local (metadata) servers are refused without a connection', async () => {
  const { token } = await createAccount(strict, 'addresses');
  const closed = await freePort();
  const started = Date.now();
  refused(
    await create(strict, token, `postgres://postgres:x@127.0.0.1:${closed}/postgres`),
    422,
    /loopback address; customer-owned servers must be public/,
    'loopback',
  );
  refused(await create(strict, token, 'postgres://postgres:x@169.254.169.254:5432/postgres'), 422, /link-local address/, 'metadata');
  refused(await create(strict, token, 'postgres://postgres:x@10.1.2.3:5432/postgres'), 422, /private address/, 'private');
  refused(await create(strict, token, 'postgres://postgres:x@[::ffff:7f00:1]:5432/postgres'), 422, /loopback address/, 'mapped loopback');
  assert.ok(Date.now() - started < 3000, 'answered without dialling (no connect timeout spent)');
});

test("Tributary's own servers are never a customer's, even with private servers allowed: no password oracle", async () => {
  const { token } = await createAccount(lenient, 'oracle');
  const shared = withCredentials(serverAdminUrl(), 'postgres', 'a-guess');
  refused(await create(lenient, token, shared), 422, /names one of Tributary's own servers/, 'the shared server');
  const viaLocalhost = new URL(shared);
  viaLocalhost.hostname = 'localhost';
  refused(await create(lenient, token, viaLocalhost.toString()), 422, /names one of Tributary's own servers/, 'the shared server by another name');
  // 0.0.0.0 and :: reach the local host too, and so does any address of this machine's interfaces.
  const others = Object.values(os.networkInterfaces())
    .flatMap((list) => list ?? [])
    .filter((i) => !i.internal && i.family === 'IPv4')
    .map((i) => i.address);
  for (const [i, host] of ['0.0.0.0', '[::]', ...others].entries()) {
    const another = new URL(shared);
    another.hostname = host;
    // An account each: the checks are rate-limited per account.
    const { token: own } = await createAccount(lenient, `oracle ${i}`);
    refused(await create(lenient, own, another.toString()), 422, /names one of Tributary's own servers/, `the shared server at ${host}`);
  }
});

test('connection failures answer from a short fixed list that echoes nothing', async () => {
  const { token } = await createAccount(lenient, 'failures');
  refused(
    await create(lenient, token, `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`),
    422,
    /cannot connect to database_url: refused/,
    'a closed port',
  );
  const httpPort = (web.address() as AddressInfo).port;
  refused(
    await create(lenient, token, `postgres://postgres:x@127.0.0.1:${httpPort}/postgres`),
    422,
    /cannot connect to database_url: not a PostgreSQL server/,
    'an HTTP port',
  );
});

test('database_url attempts are rate-limited per account', async () => {
  const { token } = await createAccount(lenient, 'scanner');
  const other = await createAccount(lenient, 'neighbour');
  const answers: number[] = [];
  for (let i = 0; i < 6; i++) answers.push((await create(lenient, token, `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`)).status);
  assert.equal(answers, [422, 422, 422, 422, 422, 429]);
  const neighbour = await create(lenient, other.token, `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`);
  assert.is(neighbour.status, 422, 'another account is not held back');
});

test('a name that resolves to a non-public address when connecting is refused then (DNS rebinding)', async () => {
  // The shared server by the name localhost: checked public once, it is loopback by now.
  const byName = new URL(serverAdminUrl());
  byName.hostname = 'localhost';
  const plain = await withClient(byName.toString(), async (client) => (await client.query('SELECT 1 AS one')).rows[0].one);
  assert.is(plain, 1, 'an unmarked URL connects');
  const error = await withClient(publicOnly(byName.toString()), async () => 'connected').catch((e: NodeJS.ErrnoException) => e);
  assert.instance(error, Error);
  assert.is((error as NodeJS.ErrnoException).code, 'EPRIVATEADDRESS');
  assert.is(connectFailure(error), 'refused (the host resolves to a non-public address)');
});

test('every connection the service makes to a database goes through the connection settings that keep the mark', async () => {
  // Only the control database's own clients (and connect.ts itself) may take a bare connection string.
  const control = new Set(['src/db/connect.ts', 'src/control/control-pool.ts', 'src/db/listen.ts', 'src/db/migrate.ts', 'src/db/embedded.ts']);
  const bare = (await sourceFiles('src')).filter(({ file, text }) => !control.has(file) && /connectionString:/.test(text)).map(({ file }) => file);
  assert.equal(bare, []);
});

test.run();
