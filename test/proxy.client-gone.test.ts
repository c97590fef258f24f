/**
 * A client that hangs up at the moment the upstream's answer comes: the proxy's work on it
 * still ends, so the proxy (and the service with it) can stop. Under load, one of
 * proxy.quota.test's clients that gave up after 300 ms left just so, and the proxy's close
 * waited for it forever: the answer's stream waited for a 'close' of the client's response
 * that had been emitted already.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startProxy, type TestProxy } from './harness/proxy.ts';
import { AIRTABLE_TEST_TOKEN, startTestService, type TestService } from './harness/service.ts';

let svc: TestService;
let upstream: http.Server;
/** The upstream's requests, held until the test answers them. */
const held: Array<{ res: http.ServerResponse }> = [];
let arrived: () => void = () => undefined;

test.before(async () => {
  svc = await startTestService({ config: { roles: ['api'] } });
  upstream = http.createServer((_req, res) => {
    held.push({ res });
    arrived();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
});

test.after(async () => {
  upstream?.closeAllConnections();
  upstream?.close();
  await svc?.stop();
});

test('a client gone just before the answer: the proxy still stops', async () => {
  const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const proxy: TestProxy = await startProxy(svc, { upstreams: new Map([['api.airtable.com', origin]]), noLimiter: true });
  const came = new Promise<void>((resolve) => (arrived = resolve));
  const client = net.connect(proxy.port, '127.0.0.1');
  client.on('error', () => undefined);
  client.write(`GET /api.airtable.com/v0/appAAAAAAAAAAAAAA/Tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${AIRTABLE_TEST_TOKEN}\r\n\r\n`);
  await came;
  // The client leaves; once the proxy has seen it go, the upstream answers.
  client.destroy();
  await new Promise((r) => setTimeout(r, 100));
  held[0]!.res.writeHead(200, { 'content-type': 'application/json' }).end('{"records":[]}');
  const stopped = await Promise.race([
    proxy.stop().then(() => 'stopped'),
    new Promise((r) => setTimeout(() => r('still stopping after 10 s'), 10_000).unref()),
  ]);
  assert.is(stopped, 'stopped');
});

test.run();
