/**
 * The slot's part of the status rule, over generated statuses: a sync's replication slot
 * keeping half or more of what its server lets it keep (max_slot_wal_keep_size) turns yellow,
 * one the next checkpoint may cut (`unreserved`) too, and a lost one red. Before, a slot could
 * keep WAL until the server's disk was full with the status `normal`. The slot's reason wins
 * a tie: its WAL is a danger to every database of the server.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SLOT_YELLOW_SHARE, slotShare, statusOf } from '../src/control/status.ts';
import type { SlotRetention } from '../src/control/status-fields.ts';
import { ago, healthyStatus, NOW } from './harness/status-fields.ts';

const MB = 1024 * 1024;

/** A healthy sync whose decoder reported just now, caught up, with `slot`. */
const withSlot = (slot: SlotRetention | null) => healthyStatus({ events: { reportedAt: ago(1000), slotLagBytes: 0, loggedThrough: ago(1000), slot } });

function* slots(seed: number, n: number): Generator<SlotRetention> {
  let x = seed;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  const statuses = ['reserved', 'extended', 'unreserved', 'lost', null];
  for (let i = 0; i < n; i++) {
    const retained = next() < 0.1 ? null : Math.floor(next() * 2048) * MB;
    const safe = next() < 0.2 ? null : Math.floor(next() * 2048 - 100) * MB;
    yield { retainedBytes: retained, safeBytes: safe, walStatus: statuses[Math.floor(next() * statuses.length)]! };
  }
}

test("the slot's part: lost is red, unreserved or half the bound yellow, else normal", () => {
  for (const slot of slots(11, 3000)) {
    const view = statusOf(withSlot(slot), NOW);
    const bound = slot.retainedBytes !== null && slot.safeBytes !== null ? slot.retainedBytes + Math.max(0, slot.safeBytes) : null;
    const share = bound ? slot.retainedBytes! / bound : null;
    const want = slot.walStatus === 'lost' ? 'red' : slot.walStatus === 'unreserved' || (share !== null && share >= SLOT_YELLOW_SHARE) ? 'yellow' : 'normal';
    const label = JSON.stringify({ slot, share, view: view.indicator });
    assert.is(view.indicator, want, label);
    if (want === 'red') assert.match(view.reason, /^replication slot lost: PostgreSQL dropped WAL it still needed/, label);
    if (want === 'yellow') assert.match(view.reason, /^replication slot holding \d+ MB of WAL/, label);
    if (want === 'yellow' && share !== null)
      assert.ok(view.reason.includes(`${Math.round(Math.min(1, share) * 100)} % of what the server lets it keep`), label);
    if (want === 'normal') assert.is(view.reason, 'syncing as usual', label);
  }
});

test('the share: what the slot keeps over that and what may still be written; none without a bound', () => {
  assert.is(slotShare({ retainedBytes: 600 * MB, safeBytes: 400 * MB, walStatus: 'reserved' }), 0.6);
  assert.is(slotShare({ retainedBytes: 600 * MB, safeBytes: null, walStatus: 'reserved' }), null);
  assert.is(slotShare({ retainedBytes: 600 * MB, safeBytes: -5 * MB, walStatus: 'unreserved' }), 1);
  assert.is(slotShare(null), null);
  assert.is(statusOf(withSlot(null), NOW).indicator, 'normal');
});

test("of two parts as bad, the slot's reason is given; a worse part still decides", () => {
  const halfway = { retainedBytes: 700 * MB, safeBytes: 300 * MB, walStatus: 'reserved' };
  const failing = { ...withSlot(halfway), lastError: 'upstream answered 500', lastErrorAt: ago(1000), lastErrorKind: 'transient' as const };
  const both = statusOf(failing, NOW);
  assert.is(both.indicator, 'yellow');
  assert.match(both.reason, /^replication slot holding 700 MB of WAL, 70 % of what the server lets it keep/);
  const fatal = statusOf({ ...failing, lastError: 'the key was rejected', lastErrorKind: 'fatal' }, NOW);
  assert.equal([fatal.indicator, fatal.reason], ['red', 'stopped: the key was rejected']);
  // The shortened share of a test's bounds.
  assert.is(statusOf(withSlot({ retainedBytes: 30 * MB, safeBytes: 70 * MB, walStatus: 'reserved' }), NOW, { slotYellowShare: 0.25 }).indicator, 'yellow');
});

test.run();
