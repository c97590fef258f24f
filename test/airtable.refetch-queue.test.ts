/**
 * The Airtable runner's refetch queue on its own: debounced records are written once stable,
 * a record held back for a proxied write is fetched again at most three times running, and
 * the queue is quiet (a pass may count) only with nothing queued, nothing being written and no
 * failure since the pass began.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RefetchQueue } from '../src/airtable/refetch-queue.ts';
import { pause } from '../src/time.ts';
import { MARK_CLOCK_MARGIN_MS } from '../src/writer/marks.ts';
import { fileLogger } from './harness/test-log.ts';

function queue(fail = new Set<string>()) {
  const fetched: Array<[string, string[]]> = [];
  let failed = 0;
  let drained = 0;
  const q = new RefetchQueue({
    fetch: async (tableId, ids) => {
      if (ids.some((id) => fail.has(id))) throw new Error('upstream away');
      fetched.push([tableId, [...ids].sort()]);
    },
    onFailed: () => failed++,
    onDrained: () => drained++,
    logger: fileLogger(),
    tickMs: 10,
  });
  const stop = new AbortController();
  const running = q.run(stop.signal, () => true);
  return {
    q,
    fetched,
    counts: () => ({ failed, drained }),
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

/** Runs `body` with a fresh queue, stopped whatever happens. */
function withQueue(body: (setUp: ReturnType<typeof queue>) => Promise<void>, fail?: Set<string>) {
  return async () => {
    const setUp = queue(fail);
    try {
      await body(setUp);
    } finally {
      await setUp.stop();
    }
  };
}

test(
  'a debounced record is written once due, and a later change moves it on',
  withQueue(async ({ q, fetched, counts }) => {
    const start = q.failures;
    q.debounce('tbl1', 'rec1', Date.now() + 150);
    q.debounce('tbl1', 'rec2', Date.now() + 50);
    assert.is(q.quietSince(start), false, 'not quiet while records wait');
    await pause(100);
    assert.equal(fetched, [['tbl1', ['rec2']]]);
    q.debounce('tbl1', 'rec1', Date.now() + 150);
    await pause(100);
    assert.equal(fetched.length, 1, 'moved on by its later change');
    await pause(150);
    assert.equal(fetched, [
      ['tbl1', ['rec2']],
      ['tbl1', ['rec1']],
    ]);
    assert.is(q.quietSince(start), true);
    assert.is(counts().drained >= 1, true, 'told when drained');
    q.debounce('tbl1', 'rec3', Date.now() + 30);
    q.forget('tbl1', 'rec3');
    await pause(80);
    assert.equal(fetched.length, 2, 'a destroyed record is not fetched');
  }),
);

test(
  'a record held for a proxied write is fetched again after the clock margin, three times running at most',
  withQueue(async ({ q, fetched }) => {
    const fetchedCount = () => fetched.filter(([, ids]) => ids.includes('rec1')).length;
    // Each fetch finds the record written through the proxy again, and holds it once more.
    for (let round = 1; round <= 4; round++) {
      const started = Date.now();
      q.hold('tbl1', ['rec1']);
      if (round === 4) break;
      while (fetchedCount() < round) await pause(20);
      assert.ok(Date.now() - started >= MARK_CLOCK_MARGIN_MS, `round ${round}: not before the clock margin`);
    }
    // The fourth hold in a row gave up on it: the proxy's copy stands, change capture brings later changes.
    assert.is(q.has('tbl1', 'rec1'), false);
    // A fetch that was written (not held) starts the count over.
    q.written('tbl1', 'rec1');
    q.hold('tbl1', ['rec1']);
    assert.is(q.has('tbl1', 'rec1'), true);
  }),
);

test(
  'a failed write makes the queue not quiet for every pass begun before it',
  withQueue(
    async ({ q, counts }) => {
      const before = q.failures;
      q.debounce('tbl1', 'bad', Date.now());
      await pause(60);
      assert.is(counts().failed, 1);
      assert.is(q.quietSince(before), false, 'a pass that began before the failure is none');
      assert.is(q.quietSince(q.failures), true, 'one that begins after it may be');
    },
    new Set(['bad']),
  ),
);

test.run();
