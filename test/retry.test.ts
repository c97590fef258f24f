/**
 * The one retry policy: the waits it gives for each jitter, and the loop that classifies
 * failures, waits, gives up on fatal ones, runs out of patience and stops when asked.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { backoffDelay, FailureCount, retry } from '../src/retry.ts';

const low = () => 0;
const high = () => 0.999_999;

test('the wait doubles from the first to the ceiling, spread as each jitter says', () => {
  const backoff = { initialMs: 100, maxMs: 1000 };
  assert.equal(
    [1, 2, 3, 4, 5, 9].map((n) => backoffDelay({ ...backoff, jitter: 'none' }, n)),
    [100, 200, 400, 800, 1000, 1000],
  );
  assert.is(backoffDelay({ ...backoff, jitter: 'full' }, 3, low), 0);
  assert.is(backoffDelay({ ...backoff, jitter: 'full' }, 3, high), 399);
  assert.is(backoffDelay({ ...backoff, jitter: 'upper' }, 3, low), 200);
  assert.ok(backoffDelay({ ...backoff, jitter: 'upper' }, 3, high) <= 400);
  assert.is(backoffDelay(backoff, 3, low), 300, 'spread: 25 % below');
  assert.ok(Math.abs(backoffDelay(backoff, 3, high) - 500) < 0.01, 'spread: 25 % above');
  assert.is(backoffDelay(backoff, 9, high), 1000, 'never past the ceiling');
  assert.is(backoffDelay({ ...backoff, factor: 3, jitter: 'none' }, 3), 900);
});

test('a failure count grows its waits and starts over after a success', () => {
  const count = new FailureCount({ initialMs: 10, maxMs: 1000, jitter: 'none' });
  assert.equal([count.next(), count.next(), count.next()], [10, 20, 40]);
  assert.is(count.count, 3);
  count.reset();
  assert.is(count.next(), 10);
});

test('retry: transient failures are tried again, a fatal one is thrown at once', async () => {
  let calls = 0;
  const seen: number[] = [];
  const value = await retry(
    async () => {
      if (++calls < 3) throw new Error('away');
      return 'done';
    },
    { backoff: { initialMs: 1, maxMs: 2 }, onRetry: (_e, attempt) => seen.push(attempt) },
  );
  assert.is(value, 'done');
  assert.equal(seen, [1, 2]);

  calls = 0;
  const fatal = await retry(
    async () => {
      calls++;
      throw new Error('wrong');
    },
    { backoff: { initialMs: 1, maxMs: 2 }, classify: (e) => ((e as Error).message === 'wrong' ? 'fatal' : 'retry') },
  ).catch((e: Error) => e.message);
  assert.is(fatal, 'wrong');
  assert.is(calls, 1);
});

test('retry: patience runs out with the last error; an abort ends the wait at once', async () => {
  // Judged by when each attempt began, not by how many fit: a loaded machine fires timers late.
  const at: number[] = [];
  const started = Date.now();
  const out = await retry(
    async () => {
      at.push(Date.now() - started);
      throw new Error(`attempt ${at.length}`);
    },
    { backoff: { initialMs: 20, maxMs: 20, jitter: 'none' }, patienceMs: 100 },
  ).catch((e: Error) => e.message);
  assert.is(out, `attempt ${at.length}`, 'the last error');
  // Each wait is the back-off, or what patience has left (so a short one only ends near the
  // 100 ms): no attempt begins early.
  assert.ok(
    at.slice(1).every((t, i) => t - at[i]! >= 19 || t >= 95),
    `attempts at ${at.join(', ')} ms`,
  );
  assert.ok(at.length <= 8, `${at.length} attempts in 100 ms at 20 ms apart`);
  assert.ok(at.at(-1)! >= 99, `the last attempt at ${at.at(-1)} ms: patience ran out first`);
  assert.ok(at.length < 2 || at.at(-2)! <= 101, `the one before at ${at.at(-2)} ms: still within patience`);

  const stop = new AbortController();
  setTimeout(() => stop.abort(), 50);
  const abortedAt = Date.now();
  const aborted = await retry(
    async () => {
      throw new Error('still away');
    },
    { backoff: { initialMs: 60_000, maxMs: 60_000 }, signal: stop.signal },
  ).catch((e: Error) => e.message);
  assert.is(aborted, 'still away');
  assert.ok(Date.now() - abortedAt < 1000, 'the 60 s wait ended with the abort');
});

test.run();
