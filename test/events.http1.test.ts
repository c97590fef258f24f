import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ResponseParser } from '../src/events/webhooks/http1-response.ts';
import { createSender, type Sender, type SenderOptions, type SendResult } from '../src/events/webhooks/send.ts';
import { freePort } from './harness/ports.ts';
import { LOCALHOST_CERT_PEM, LOCALHOST_KEY_PEM, TEST_CA_PEM } from './harness/tls-fixture.ts';

// The webhook HTTP/1.1 client (http1.ts, through createSender) against raw TCP servers that
// answer with exactly the bytes each case needs.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TIMEOUT_MS = 1000;
const HEADERS = { 'content-type': 'application/json', 'webhook-id': 'id1' };
const BODY = '{"a":"é"}';
const OK_204 = 'HTTP/1.1 204 No Content\r\n\r\n';

// ── a raw TCP server ──

interface ReceivedRequest {
  /** 1-based number of the connection it came on, in order of acceptance. */
  connection: number;
  /** 1-based number of the request on its connection. */
  onConnection: number;
  /** 1-based number of the request on the server. */
  n: number;
  head: string;
  body: Buffer;
}

type Script = (socket: net.Socket, request: ReceivedRequest) => void;

interface RawServer {
  url: URL;
  port: number;
  requests: ReceivedRequest[];
  connections(): number;
  /** Resolves once `count` connections have closed on the server's side. */
  closedConnections(count: number): Promise<void>;
  close(): Promise<void>;
}

const cleanups: (() => unknown)[] = [];

test.after.each(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function rawServer(script: Script): Promise<RawServer> {
  const sockets = new Set<net.Socket>();
  const requests: ReceivedRequest[] = [];
  let connections = 0;
  let closed = 0;
  let waiters: { count: number; resolve: () => void }[] = [];
  const server = net.createServer((socket) => {
    const connection = ++connections;
    let onConnection = 0;
    let buffer = Buffer.alloc(0);
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      closed++;
      for (const w of waiters) if (closed >= w.count) w.resolve();
      waiters = waiters.filter((w) => closed < w.count);
    });
    socket.on('data', (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const body = buffer.subarray(end + 4, end + 4 + length);
        buffer = buffer.subarray(end + 4 + length);
        const request = { connection, onConnection: ++onConnection, n: requests.length + 1, head, body };
        requests.push(request);
        script(socket, request);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const raw: RawServer = {
    url: new URL(`http://127.0.0.1:${port}/hook?x=1`),
    port,
    requests,
    connections: () => connections,
    closedConnections: (count) => (closed >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve }))),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  cleanups.push(() => raw.close());
  return raw;
}

function newSender(options: Partial<SenderOptions> = {}): Sender {
  const sender = createSender({ allowPrivate: true, timeoutMs: TIMEOUT_MS, maxSockets: 4, ...options });
  cleanups.push(() => sender.close());
  return sender;
}

/** A raw server and a sender for it. */
async function world(script: Script, options: Partial<SenderOptions> = {}) {
  const server = await rawServer(script);
  const sender = newSender(options);
  const send = (body = BODY, signal?: AbortSignal) => sender.send(server.url, HEADERS, body, signal);
  /** `times` POSTs, one after the other. */
  const sendSeq = async (times: number): Promise<SendResult[]> => {
    const results: SendResult[] = [];
    for (let i = 0; i < times; i++) results.push(await send());
    return results;
  };
  return { server, sender, send, sendSeq };
}

/** Writes the text one byte per write, each after the previous one has been handed to the system. */
async function writeByBytes(socket: net.Socket, text: string): Promise<void> {
  for (const byte of Buffer.from(text, 'latin1')) {
    if (socket.destroyed) return;
    await new Promise<void>((resolve) => socket.write(Buffer.from([byte]), () => resolve()));
  }
}

const statuses = (results: SendResult[]) => results.map((r) => r.status);
const errors = (results: SendResult[]) => results.map((r) => r.error);

function headerLines(head: string): Map<string, string[]> {
  const lines = new Map<string, string[]>();
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon);
    lines.set(name, [...(lines.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  return lines;
}

// ── the request, keep-alive ──

test('keep-alive: three POSTs on one connection, with the exact request bytes', async () => {
  const { server, sendSeq } = await world((socket) => socket.write(OK_204));
  const results = await sendSeq(3);
  assert.equal(results, [
    { ok: true, status: 204 },
    { ok: true, status: 204 },
    { ok: true, status: 204 },
  ]);
  assert.is(server.connections(), 1);
  assert.equal(
    server.requests.map((r) => [r.connection, r.onConnection]),
    [
      [1, 1],
      [1, 2],
      [1, 3],
    ],
  );
  for (const request of server.requests) {
    const lines = request.head.split('\r\n');
    assert.is(lines[0], 'POST /hook?x=1 HTTP/1.1');
    assert.is(lines[1], `host: 127.0.0.1:${server.port}`);
    const headers = headerLines(request.head);
    assert.equal(headers.get('content-type'), ['application/json']);
    assert.equal(headers.get('webhook-id'), ['id1']);
    // The length in bytes of the UTF-8 body, not in characters.
    assert.equal(headers.get('content-length'), ['10']);
    assert.equal(headers.get('connection'), ['keep-alive']);
    assert.ok(headers.has('user-agent'));
    assert.not.ok(headers.has('transfer-encoding'));
    assert.ok(request.body.equals(Buffer.from(BODY, 'utf8')), `body bytes: ${request.body.toString('hex')}`);
  }
});

// ── framing of the response ──

test('a Content-Length response written one byte at a time', async () => {
  const response = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nKeep-Alive: timeout=30\r\n\r\nhello';
  const { server, sendSeq } = await world((socket) => void writeByBytes(socket, response));
  const results = await sendSeq(3);
  assert.equal(statuses(results), [200, 200, 200]);
  assert.ok(results.every((r) => r.ok));
  assert.is(server.connections(), 1);
});

test('chunked with chunk extensions and trailers, written one byte at a time', async () => {
  const response = 'HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n';
  const { server, sendSeq } = await world((socket) => void writeByBytes(socket, response));
  const results = await sendSeq(3);
  assert.equal(errors(results), ['HTTP 500: hello world', 'HTTP 500: hello world', 'HTTP 500: hello world']);
  assert.equal(statuses(results), [500, 500, 500]);
  assert.is(server.connections(), 1);
});

test('the parser reads each response the same whole or one byte at a time', () => {
  const cases: [response: string, status: number, body: string, keepAlive: boolean][] = [
    ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\nKeep-Alive: timeout=30\r\n\r\nhello', 200, 'hello', true],
    ['HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n', 500, 'hello world', true],
    ['HTTP/1.1 200\r\ncontent-LENGTH: 2\r\nX-Other-Header-Long: 1\r\n\r\nok', 200, 'ok', true],
    ['HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 200, 'abc', true],
    ['HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n', 201, '', true],
    [OK_204, 204, '', true],
    ['HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok', 200, 'ok', false],
    ['HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n', 200, '', false],
  ];
  for (const [response, status, body, keepAlive] of cases) {
    const bytes = Buffer.from(response, 'latin1');
    for (const step of [bytes.length, 1, 2, 7]) {
      const parser = new ResponseParser(16 * 1024);
      parser.reset(4096);
      let outcome: unknown;
      let at = 0;
      for (; at < bytes.length; at += step) {
        outcome = parser.feed(bytes.subarray(at, at + step));
        if (typeof outcome !== 'symbol') break;
      }
      const label = `${JSON.stringify(response)} in pieces of ${step}`;
      assert.equal(outcome, { leftover: false }, label);
      assert.ok(at + step >= bytes.length, `${label}: complete only at the end`);
      assert.is(parser.status, status, label);
      assert.is(parser.body().toString('latin1'), body, label);
      assert.is(parser.keepAlive, keepAlive, label);
    }
  }
});

test('a status line without a reason phrase, header names in odd case', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.1 200\r\ncontent-LENGTH: 2\r\nX-Other-Header-Long: 1\r\n\r\nok'));
  assert.equal(statuses(await sendSeq(3)), [200, 200, 200]);
  assert.is(server.connections(), 1);
});

test('Transfer-Encoding: gzip, chunked is read as chunked', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'));
  const results = await sendSeq(3);
  assert.equal(
    results.map((r) => r.ok),
    [true, true, true],
  );
  assert.is(server.connections(), 1);
});

test('100 Continue, then 201', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n'));
  const results = await sendSeq(3);
  assert.equal(statuses(results), [201, 201, 201]);
  assert.ok(results.every((r) => r.ok));
  assert.is(server.connections(), 1);
});

// ── connections that are not reused ──

test('Connection: close: a new connection for each POST', async () => {
  const { server, sendSeq } = await world((socket) => {
    socket.write('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok');
    socket.end();
  });
  assert.equal(statuses(await sendSeq(3)), [200, 200, 200]);
  assert.is(server.connections(), 3);
});

test('a body delimited by the end of the connection', async () => {
  const { server, sendSeq } = await world((socket) => {
    socket.write('HTTP/1.1 503 Busy\r\n\r\nnot now');
    socket.end();
  });
  const results = await sendSeq(3);
  assert.equal(errors(results), ['HTTP 503: not now', 'HTTP 503: not now', 'HTTP 503: not now']);
  assert.equal(statuses(results), [503, 503, 503]);
  assert.is(server.connections(), 3);
});

test('HTTP/1.0 without keep-alive: not reused, even if the server leaves it open', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n'));
  assert.equal(statuses(await sendSeq(3)), [200, 200, 200]);
  assert.is(server.connections(), 3);
});

test('HTTP/1.0 that closes after answering', async () => {
  const { server, sendSeq } = await world((socket) => {
    socket.write('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n');
    socket.end();
  });
  assert.equal(statuses(await sendSeq(3)), [200, 200, 200]);
  assert.is(server.connections(), 3);
});

test('HTTP/1.0 with Connection: keep-alive is reused', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n'));
  assert.equal(statuses(await sendSeq(3)), [200, 200, 200]);
  assert.is(server.connections(), 1);
});

test('a 3xx is a failure and is not followed', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n'));
  const results = await sendSeq(2);
  for (const result of results) assert.equal(result, { ok: false, status: 302, error: 'HTTP 302 (redirects are not followed)' });
  assert.equal(
    server.requests.map((r) => r.head.split('\r\n')[0]),
    ['POST /hook?x=1 HTTP/1.1', 'POST /hook?x=1 HTTP/1.1'],
  );
  assert.is(server.connections(), 1);
});

test('a huge error body is cut short and its connection not reused', async () => {
  const { server, sendSeq } = await world((socket) => socket.write(`HTTP/1.1 500 X\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(100000)}`));
  const results = await sendSeq(3);
  for (const result of results) assert.equal(result, { ok: false, status: 500, error: `HTTP 500: ${'x'.repeat(200)}` });
  assert.is(server.connections(), 3);
});

test('a huge 200 body is still a success (cut, not reused)', async () => {
  const { server, sendSeq } = await world((socket) => socket.write(`HTTP/1.1 200 X\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(100000)}`));
  assert.equal(await sendSeq(3), [
    { ok: true, status: 200 },
    { ok: true, status: 200 },
    { ok: true, status: 200 },
  ]);
  assert.is(server.connections(), 3);
});

test('extra bytes after the response: the connection is not reused', async () => {
  const { server, sendSeq } = await world((socket) => socket.write(OK_204 + OK_204));
  assert.equal(statuses(await sendSeq(3)), [204, 204, 204]);
  assert.is(server.connections(), 3);
});

// ── malformed answers and failures ──

test('response headers too large', async () => {
  const { server, send } = await world((socket) => socket.write(`HTTP/1.1 200 OK\r\nX-Big: ${'y'.repeat(20000)}\r\n\r\n`));
  assert.equal(await send(), { ok: false, error: 'the response headers are too large' });
  await server.closedConnections(1);
});

test('an answer that is not HTTP', async () => {
  const { server, send } = await world((socket) => socket.write('SSH-2.0-OpenSSH\r\n\r\n'));
  assert.equal(await send(), { ok: false, error: 'the response is not HTTP/1.x' });
  await server.closedConnections(1);
});

test('conflicting Content-Length headers', async () => {
  const { send } = await world((socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'));
  assert.equal(await send(), { ok: false, error: 'the response has conflicting Content-Length headers' });
});

test('a server that never answers: timeout, and the connection is closed', async () => {
  const { server, send } = await world(() => {});
  const started = Date.now();
  assert.equal(await send(), { ok: false, error: `timed out after ${TIMEOUT_MS} ms` });
  assert.ok(Date.now() - started >= TIMEOUT_MS - 50, `after ${Date.now() - started} ms`);
  await server.closedConnections(1);
  assert.is(server.requests.length, 1);
});

test('a reset before any answer', async () => {
  const { server, send } = await world((socket) => socket.resetAndDestroy());
  const result = await send();
  assert.is(result.ok, false);
  assert.is(result.status, undefined);
  assert.match(result.error ?? '', /^ECONNRESET/);
  // A new connection failing is not retried.
  assert.is(server.connections(), 1);
});

test('a close before any answer', async () => {
  const { server, send } = await world((socket) => socket.end());
  const result = await send();
  assert.is(result.ok, false);
  assert.match(result.error ?? '', /closed before a response/);
  assert.is(server.connections(), 1);
});

test('a close in the middle of the body', async () => {
  const { send } = await world((socket) => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
    socket.end();
  });
  assert.equal(await send(), { ok: false, error: 'the connection closed before the response ended' });
});

test('connection refused', async () => {
  const sender = newSender();
  const port = await freePort();
  const result = await sender.send(new URL(`http://127.0.0.1:${port}/x`), HEADERS, '{}');
  assert.is(result.ok, false);
  assert.match(result.error ?? '', /ECONNREFUSED/);
});

// ── stale keep-alive connections ──

test('a server that closes keep-alive connections after answering: the next POST gets a fresh one', async () => {
  const { server, send } = await world((socket) => {
    socket.write(OK_204);
    socket.end();
  });
  assert.equal(await send(), { ok: true, status: 204 });
  await server.closedConnections(1);
  assert.equal(await send(), { ok: true, status: 204 });
  await server.closedConnections(2);
  assert.equal(await send(), { ok: true, status: 204 });
  assert.is(server.connections(), 3);
});

test('a reused connection that dies before answering: retried once on a fresh connection', async () => {
  // The first connection answers its first request and drops on the second, as a server does
  // that closed an idle connection just as the request went out.
  const { server, sendSeq } = await world((socket, request) => {
    if (request.connection === 1 && request.onConnection === 2) socket.destroy();
    else socket.write(OK_204);
  });
  assert.equal(await sendSeq(3), [
    { ok: true, status: 204 },
    { ok: true, status: 204 },
    { ok: true, status: 204 },
  ]);
  assert.is(server.connections(), 2);
  assert.equal(
    server.requests.map((r) => [r.connection, r.onConnection]),
    [
      [1, 1],
      [1, 2],
      [2, 1],
      [2, 2],
    ],
  );
});

test('the retry of a stale connection is not retried again', async () => {
  // Only the very first request is answered; every later one finds its connection dropped.
  const { server, sendSeq } = await world((socket, request) => {
    if (request.n === 1) socket.write(OK_204);
    else socket.destroy();
  });
  const results = await sendSeq(2);
  assert.equal(results[0], { ok: true, status: 204 });
  assert.is(results[1]!.ok, false);
  assert.match(results[1]!.error ?? '', /^ECONNRESET/);
  assert.is(server.connections(), 2);
  assert.is(server.requests.length, 3);
});

test('a reused connection that dies after part of the answer is not retried', async () => {
  const { server, sendSeq } = await world((socket, request) => {
    if (request.onConnection === 1) socket.write(OK_204);
    else {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
      socket.end();
    }
  });
  const results = await sendSeq(2);
  assert.equal(results[1], { ok: false, error: 'the connection closed before the response ended' });
  assert.is(server.connections(), 1);
});

test('Keep-Alive: timeout=1 leaves no time for reuse', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.1 204 No Content\r\nKeep-Alive: timeout=1\r\n\r\n'));
  assert.equal(statuses(await sendSeq(3)), [204, 204, 204]);
  assert.is(server.connections(), 3);
});

test('Keep-Alive: timeout=5 still allows reuse', async () => {
  const { server, sendSeq } = await world((socket) => socket.write('HTTP/1.1 204 No Content\r\nKeep-Alive: timeout=5, max=100\r\n\r\n'));
  assert.equal(statuses(await sendSeq(3)), [204, 204, 204]);
  assert.is(server.connections(), 1);
});

// ── concurrency and cancellation ──

test('20 POSTs at once with maxSockets 4: four connections, the rest queued', async () => {
  let inFlight = 0;
  let most = 0;
  const { server, send } = await world((socket) => {
    inFlight++;
    most = Math.max(most, inFlight);
    setTimeout(() => {
      inFlight--;
      socket.write(OK_204);
    }, 5);
  });
  const results = await Promise.all(Array.from({ length: 20 }, () => send('{}')));
  assert.ok(results.every((r) => r.ok && r.status === 204));
  assert.is(server.connections(), 4);
  assert.is(server.requests.length, 20);
  assert.is(most, 4);
});

test('abort while the request is out: stopped, connection closed', async () => {
  const controller = new AbortController();
  const { server, send } = await world(() => controller.abort());
  assert.equal(await send('{}', controller.signal), { ok: false, error: 'stopped' });
  await server.closedConnections(1);
});

test('abort also stops a POST waiting for a connection', async () => {
  const controller = new AbortController();
  const { server, send } = await world(() => controller.abort(), { maxSockets: 1 });
  const results = await Promise.all([send('{}', controller.signal), send('{}', controller.signal)]);
  assert.equal(errors(results), ['stopped', 'stopped']);
  assert.is(server.connections(), 1);
  assert.is(server.requests.length, 1);
});

test('an already aborted signal: nothing is sent', async () => {
  const { server, send } = await world((socket) => socket.write(OK_204));
  assert.equal(await send('{}', AbortSignal.abort()), { ok: false, error: 'stopped' });
  assert.is(server.connections(), 0);
});

// ── URLs ──

test('credentials in the URL become Basic authentication', async () => {
  const server = http.createServer((req, res) => {
    res.writeHead(req.headers.authorization === `Basic ${Buffer.from('us er:p@ss').toString('base64')}` ? 200 : 401).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as net.AddressInfo).port;
  const sender = newSender();
  assert.equal(await sender.send(new URL(`http://us%20er:p%40ss@127.0.0.1:${port}/`), HEADERS, '{}'), { ok: true, status: 200 });
});

test('an IPv6 literal (when ::1 is available)', async () => {
  const server = http.createServer((req, res) => res.writeHead(req.headers.host?.startsWith('[::1]:') ? 204 : 400).end());
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(0, '::1', () => resolve(true));
  });
  if (!listening) return;
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as net.AddressInfo).port;
  const sender = newSender();
  assert.equal(await sender.send(new URL(`http://[::1]:${port}/`), HEADERS, '{}'), { ok: true, status: 204 });
});

// ── TLS ──

test('https: a certificate for the name is accepted and its connection reused; a name mismatch fails', async () => {
  let secureConnections = 0;
  const server = https.createServer({ key: LOCALHOST_KEY_PEM, cert: LOCALHOST_CERT_PEM }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d));
    req.on('end', () => res.writeHead(body === '{"t":1}' ? 204 : 400).end());
  });
  server.on('secureConnection', () => secureConnections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as net.AddressInfo).port;

  // The sender trusts the system's authorities: the test one is added to a child process's.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-http1-tls-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const caFile = path.join(dir, 'ca.pem');
  await writeFile(caFile, TEST_CA_PEM);
  const sendUrl = pathToFileURL(path.join(root, 'src/events/webhooks/send.ts')).href;
  const script = `
    import { createSender } from ${JSON.stringify(sendUrl)};
    const sender = createSender({ allowPrivate: true, timeoutMs: ${TIMEOUT_MS}, maxSockets: 4 });
    const results = [];
    for (const host of ['localhost', 'localhost', '127.0.0.1']) {
      results.push(await sender.send(new URL('https://' + host + ':${port}/'), ${JSON.stringify(HEADERS)}, '{"t":1}'));
    }
    sender.close();
    process.stdout.write(JSON.stringify(results));
  `;
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: root,
      env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${err}`))));
  });
  const [good, again, mismatch] = JSON.parse(output) as SendResult[];
  assert.equal(good, { ok: true, status: 204 });
  assert.equal(again, { ok: true, status: 204 });
  assert.is(mismatch!.ok, false);
  assert.is(mismatch!.status, undefined);
  assert.match(mismatch!.error ?? '', /IP|altname|cert/i);
  // Both POSTs to localhost went over one TLS connection.
  assert.is(secureConnections, 1);
});

test.run();
