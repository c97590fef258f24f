/** The semaphore: at most n at once, waiting works served by priority then arrival, slots handed over. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { semaphore } from '../src/semaphore.ts';

/** A work that records its start and ends when `release` is called. */
function gate(log: string[], name: string) {
  let release!: () => void;
  const ended = new Promise<void>((resolve) => (release = resolve));
  const work = async () => {
    log.push(name);
    await ended;
  };
  return { work, release: () => release() };
}

test('at most n run; waiting works start by priority, then in arrival order', async () => {
  const limited = semaphore(2);
  const log: string[] = [];
  const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map((n) => gate(log, n));
  const runs = [limited(a!.work, 1), limited(b!.work, 1), limited(c!.work, 1), limited(d!.work, 0), limited(e!.work, 0)];
  await new Promise((r) => setImmediate(r));
  assert.equal(log, ['a', 'b']);
  a!.release();
  await new Promise((r) => setImmediate(r));
  assert.equal(log, ['a', 'b', 'd'], 'the first waiting work of the lowest priority');
  b!.release();
  d!.release();
  await new Promise((r) => setImmediate(r));
  assert.equal(log, ['a', 'b', 'd', 'e', 'c']);
  c!.release();
  e!.release();
  await Promise.all(runs);
});

test('a freed slot goes to the waiting work, not to a caller arriving meanwhile', async () => {
  const limited = semaphore(1);
  const log: string[] = [];
  const [a, b, c] = ['a', 'b', 'c'].map((n) => gate(log, n));
  const first = limited(a!.work);
  const second = limited(b!.work);
  await new Promise((r) => setImmediate(r));
  a!.release();
  // Arrives after the slot was freed, before the waiting work ran.
  const third = limited(c!.work);
  await new Promise((r) => setImmediate(r));
  assert.equal(log, ['a', 'b'], 'only one runs at once');
  b!.release();
  await new Promise((r) => setImmediate(r));
  assert.equal(log, ['a', 'b', 'c']);
  c!.release();
  await Promise.all([first, second, third]);
});

test('a failing work frees its slot', async () => {
  const limited = semaphore(1);
  const failed = await limited(async () => Promise.reject(new Error('no'))).catch((error: Error) => error.message);
  assert.is(failed, 'no');
  assert.is(await limited(async () => 7), 7);
});

test.run();
