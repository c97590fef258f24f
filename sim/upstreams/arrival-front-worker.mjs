// The worker behind arrival-front.ts. Plain JavaScript: a worker thread does not inherit the
// TypeScript loader. It does nothing but pass bytes, so its event loop reads a request within
// a millisecond of its arrival whatever the fake's own loop is doing.
import { readlinkSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';

// The edge this plays is on machines of its own, which nothing here starves: this thread alone
// (Linux takes a thread id where a process id goes) runs ahead of the rest of the machine, when
// it may (root). Starved, it stamped a limiter's well-spaced requests late and together, and the
// fake answered 429 where Stripe's edge would have counted them as they were sent (proxy.stripe,
// one core burnt). Elsewhere, or without the privilege, it runs as before.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').at(-1)), -15);
} catch {}

const { targetUrl, header } = workerData;
const target = new URL(targetUrl);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

const server = createServer((req, res) => {
  const headers = { ...req.headers, [header]: String(Date.now()) };
  const upstream = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
    answer.pipe(res);
    // The fake cut its answer short (a truncated body, a dropped socket): so does the front.
    answer.on('aborted', () => res.destroy());
    answer.on('error', () => res.destroy());
  });
  upstream.on('error', () => res.destroy());
  req.pipe(upstream);
  // The client gave up (a timeout against a hanging fake): the fake's side goes too.
  res.on('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
});
server.keepAliveTimeout = 5_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  parentPort.postMessage({ port: typeof address === 'object' && address ? address.port : 0 });
});
