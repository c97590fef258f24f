/**
 * The simulation's TCP relay (sim/tcp-relay.ts) makes the path faults: a slow path holds each
 * chunk back for its latency, both ways, in order, and closes only after what it holds; a
 * hung one passes nothing and closes nothing. Checked with an echo server behind it.
 */
import net from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { TcpRelay } from '../sim/tcp-relay.ts';

let echo: net.Server;
let relay: TcpRelay;

test.before(async () => {
  echo = net.createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  relay = await TcpRelay.start({ host: '127.0.0.1', port: (echo.address() as net.AddressInfo).port });
});

test.after(async () => {
  await relay.close();
  await new Promise((resolve) => echo.close(resolve));
});

/** Sends `chunks` one by one through the relay and reads the echo until the far end closes. */
async function roundTrip(chunks: string[]): Promise<{ ms: number; text: string }> {
  const from = Date.now();
  const socket = net.connect(relay.port, '127.0.0.1');
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString()));
  await new Promise((resolve) => socket.once('connect', resolve));
  for (const chunk of chunks) {
    socket.write(chunk);
    await new Promise((r) => setTimeout(r, 5));
  }
  socket.end();
  await new Promise((resolve) => socket.once('close', resolve));
  return { ms: Date.now() - from, text };
}

test('a slow path delays both ways, keeps the order, and closes after what it holds', async () => {
  const chunks = Array.from({ length: 20 }, (_, i) => `<${i}>`);
  relay.slow(150, 100);
  const slow = await roundTrip(chunks);
  relay.fast();
  assert.is(slow.text, chunks.join(''));
  assert.ok(slow.ms >= 300, `${slow.ms} ms: both ways held back`);
  const fast = await roundTrip(chunks);
  assert.is(fast.text, chunks.join(''));
  assert.ok(fast.ms < slow.ms, `${fast.ms} ms fast against ${slow.ms} ms slow`);
});

test('a hung path passes nothing and closes nothing; after heal, new connections pass', async () => {
  relay.hang();
  const socket = net.connect(relay.port, '127.0.0.1');
  let got = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.on('close', () => (closed = true));
  socket.write('lost');
  await new Promise((r) => setTimeout(r, 500));
  assert.is(got, '');
  assert.is(closed, false);
  relay.heal();
  assert.is((await roundTrip(['back'])).text, 'back');
  socket.destroy();
});

test.run();
