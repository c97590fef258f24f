/**
 * Per-parent lists read several parents at once, in order within a window past the prefix read
 * in full: the place saved is that prefix, a failure starts no new parent, and a stop ends the
 * reads waiting past the window instead of leaving them waiting.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readParentsInOrder } from '../src/stripe/parents.ts';

const ids = Array.from({ length: 40 }, (_, i) => `p${String(i).padStart(2, '0')}`);
const tick = () => new Promise((r) => setTimeout(r, 1));

/** Reads `ids` four at once within a window of eight, the place saved at every step: the run and the places saved. */
function readAll(read: (id: string) => Promise<void>, signal = new AbortController().signal) {
  const saved: string[] = [];
  const run = readParentsInOrder(ids, {
    read,
    save: async (through) => {
      saved.push(through);
    },
    atOnce: 4,
    window: 8,
    saveEveryMs: 0,
    signal,
  });
  return { run, saved };
}

test('every parent is read, never more than the window past the prefix; the place ends at the last', async () => {
  const started: string[] = [];
  let done = 0;
  const { run, saved } = readAll(async (id) => {
    started.push(id);
    // The furthest parent started is never more than the window past the parents read.
    assert.ok(ids.indexOf(id) < done + 8 + 4, `${id} started with ${done} read`);
    await tick();
    done++;
  });
  await run;
  assert.equal([...started].sort(), ids);
  assert.is(saved.at(-1), 'p39');
  assert.equal(saved, [...saved].sort(), 'the place only moves forward');
});

test('after a failure no new parent starts and the place is the prefix before the failing one', async () => {
  const started: string[] = [];
  const { run, saved } = readAll(async (id) => {
    started.push(id);
    await tick();
    if (id === 'p10') throw new Error('p10 refused');
  });
  const failed = await run.catch((error: Error) => error.message);
  assert.is(failed, 'p10 refused');
  assert.is(saved.at(-1), 'p09', 'read again from p10');
  assert.ok(started.length <= 10 + 8, `${started.length} started: at most the window past the prefix`);
});

test('a stop ends the reads waiting past the window', async () => {
  const stop = new AbortController();
  // Reads in flight finish despite the stop (as a page being written does); the ones not begun must not begin,
  // and the ones waiting past the window must not wait for a prefix that no longer grows.
  const { run } = readAll(async () => {
    await tick();
    await tick();
  }, stop.signal);
  await tick();
  stop.abort(new Error('stopping'));
  const outcome = await Promise.race([
    run.then(
      () => 'read',
      () => 'stopped',
    ),
    new Promise((r) => setTimeout(() => r('hung'), 2000)),
  ]);
  assert.is(outcome, 'stopped');
});

test.run();
