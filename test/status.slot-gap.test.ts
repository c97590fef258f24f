/**
 * A lost slot's part of the status rule, over generated gaps (slot_gaps and the re-read's
 * backfill): red from the loss until a new slot is made, yellow while every collection is
 * read again (or when the re-read failed or was canceled), normal once it is done or a day has
 * passed; the reason says when it was lost and why. Before, a lost slot left the status
 * `normal` ("syncing as usual") while the stream had stopped.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { statusOf } from '../src/control/status.ts';
import type { SlotGap } from '../src/control/status-fields.ts';
import { ago, healthyStatus, NOW } from './harness/status-fields.ts';

const HOUR = 3_600_000;

function* gaps(seed: number, n: number): Generator<SlotGap> {
  let x = seed;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  const states = ['running', 'done', 'canceled', 'failed', null];
  for (let i = 0; i < n; i++) {
    const lostMs = Math.floor(next() * 30 * HOUR);
    const recovered = next() < 0.8;
    const state = recovered ? states[Math.floor(next() * states.length)]! : null;
    yield {
      id: `gap_${String(i).padStart(16, '0')}`,
      reason: next() < 0.5 ? 'missing' : 'invalidated',
      detail: 'the replication slot tr_x does not exist',
      lostAt: ago(lostMs),
      recoveredAt: recovered ? ago(Math.max(0, lostMs - 1000)) : null,
      backfillId: 'bf_0000000000000000',
      backfillState: state,
      rereadAt: state === 'done' ? ago(Math.max(0, lostMs - 2000)) : null,
    };
  }
}

test("a gap's part: red until a new slot, yellow until the re-read is done, for at most a day", () => {
  for (const gap of gaps(5, 3000)) {
    const view = statusOf(healthyStatus({ slotGap: gap }), NOW);
    const open = gap.backfillState !== 'done' && NOW.getTime() - gap.lostAt.getTime() <= 24 * HOUR;
    const want = !open ? 'normal' : gap.recoveredAt ? 'yellow' : 'red';
    const label = JSON.stringify({ gap, view });
    assert.is(view.indicator, want, label);
    if (want === 'normal') {
      assert.is(view.reason, 'syncing as usual', label);
      continue;
    }
    assert.match(
      view.reason,
      new RegExp(`^replication slot lost at ${gap.lostAt.toISOString().slice(0, 10)} \\d\\d:\\d\\d:\\d\\d UTC \\(${gap.detail}\\)`),
      label,
    );
    if (want === 'red') assert.match(view.reason, /making a new one$/, label);
    else if (gap.backfillState === 'failed' || gap.backfillState === 'canceled')
      assert.match(view.reason, /ask for a backfill to make the events whole$/, label);
    else assert.match(view.reason, /every collection is being read again into the events \(backfill bf_0{16}\)/, label);
  }
});

test('a gap outranks nothing worse: a rejected key still decides', () => {
  const [gap] = [...gaps(9, 1)];
  const open = { ...gap!, lostAt: ago(1000), recoveredAt: ago(500), backfillState: 'running' };
  const fatal = statusOf(healthyStatus({ slotGap: open, lastError: 'the key was rejected', lastErrorAt: ago(100), lastErrorKind: 'fatal' }), NOW);
  assert.equal([fatal.indicator, fatal.reason], ['red', 'stopped: the key was rejected']);
  assert.is(statusOf(healthyStatus({ slotGap: open }), NOW).indicator, 'yellow');
});

test.run();
