/**
 * The README's five-minute tour, run as written. Its shell blocks run in a copy of the
 * repository (the tracked files as they are in the work tree, the same node_modules): the
 * "terminal 1" block in the background, the others one after another in a single bash with
 * `set -euo pipefail`, so any failing command fails the test (test/harness/tour.ts).
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { bindable } from './harness/ports.ts';
import { collect, copyOfRepository, pattern, readmeTour, runTourBlocks, TOUR_PORTS, terminalEnv } from './harness/tour.ts';

test('pattern: … stands for a word, | for an aligned column bar', () => {
  assert.ok(pattern('cus_… | Ada King').test(' cus_Mg6ZWrxKVbvPla | Ada King'));
  assert.ok(pattern('Launch | Todo').test(' Launch | Todo\n'));
  assert.not.ok(pattern('Launch | Todo').test(' Launch | Done'));
  assert.ok(pattern('{"ok":true,"lsn":"…"}').test('{"ok":true,"lsn":"0/29E1118"}'));
});

test('the README tour runs as written against the fakes', async () => {
  const { background, blocks } = await readmeTour();
  assert.ok(blocks.length >= 5, `the tour has ${blocks.length} blocks`);
  assert.ok(blocks.reduce((n, b) => n + b.expected.length, 0) >= 6, 'the tour says what its commands print');
  const taken = [];
  for (const port of TOUR_PORTS) if ((await bindable(port)) === undefined) taken.push(port);
  assert.equal(taken, [], `the tour uses fixed ports; taken here: ${taken.join(', ')}`);

  const dir = await copyOfRepository();
  const env = terminalEnv();
  const first = spawn('bash', ['-c', background], { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const service = collect(first);
  try {
    await runTourBlocks(blocks, dir, env, service.err);
  } finally {
    // Ctrl-C in the first terminal, and the fakes stopped with it.
    try {
      process.kill(-first.pid!, 'SIGINT');
    } catch {}
    const timer = setTimeout(() => {
      try {
        process.kill(-first.pid!, 'SIGKILL');
      } catch {}
    }, 60_000);
    await service.exited;
    clearTimeout(timer);
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
