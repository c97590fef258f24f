/**
 * The status rule over the whole path: the sync's own part (cycles, passes, errors) and the
 * event log's (how far the decoder's log is behind the database). Before, a sync whose
 * decoder had stopped showed `normal`, "syncing as usual". Checked over generated statuses:
 * the indicator is the worse of the two parts, the events part turns yellow at two minutes
 * behind and red at five, the reason names the part that decided, and a caught-up log with a
 * recent report reads 0.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EVENTS_BEHIND_YELLOW_MS, eventsLagSeconds, indicatorOf, RED_AFTER_MS, statusOf } from '../src/control/status.ts';
import type { SyncStatusFields } from '../src/control/status-fields.ts';
import { ago, healthyStatus, NOW } from './harness/status-fields.ts';

/** A healthy sync, with the decoder's report `events`. */
const healthy = (events?: SyncStatusFields['events']) => healthyStatus(events ? { events } : {});

/** A small generator, seeded, so a failure names its case. */
function* cases(seed: number, n: number): Generator<{ reportedAgo: number; throughBefore: number; slotLag: number; failing: boolean }> {
  let x = seed;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  for (let i = 0; i < n; i++) {
    yield {
      reportedAgo: Math.floor(next() * 600_000),
      throughBefore: Math.floor(next() * 600_000),
      slotLag: next() < 0.5 ? Math.floor(next() * 1000) : Math.floor(next() * 50_000_000),
      failing: next() < 0.2,
    };
  }
}

test('the indicator is the worse of the sync part and the events part, over generated statuses', () => {
  const rank = { normal: 0, yellow: 1, red: 2 } as const;
  for (const c of cases(7, 2000)) {
    const reportedAt = ago(c.reportedAgo);
    const events = { reportedAt, slotLagBytes: c.slotLag, loggedThrough: new Date(reportedAt.getTime() - c.throughBefore) };
    const status = healthy(events);
    if (c.failing) Object.assign(status, { lastError: 'upstream answered 500', lastErrorAt: ago(1_000), lastErrorKind: 'transient' });
    const view = statusOf(status, NOW);
    const lag = view.events_lag_seconds!;
    const label = JSON.stringify({ ...c, lag, view: view.indicator });
    // The lag: 0 only for a recent report that found the log caught up; else the log's age.
    const caughtUp = c.reportedAgo <= 90_000 && c.throughBefore <= 30_000 && c.slotLag < 1024 * 1024;
    assert.is(lag, caughtUp ? 0 : Math.round((c.reportedAgo + c.throughBefore) / 1000), label);
    const eventsPart = lag * 1000 >= RED_AFTER_MS ? 'red' : lag * 1000 >= EVENTS_BEHIND_YELLOW_MS ? 'yellow' : 'normal';
    const syncPart = c.failing ? 'yellow' : 'normal';
    const worse = rank[eventsPart] > rank[syncPart] ? eventsPart : syncPart;
    assert.is(view.indicator, worse, label);
    if (rank[eventsPart] >= rank[syncPart] && eventsPart !== 'normal') assert.match(view.reason, /^events (behind|stopped): changes of the last \d+ s/, label);
    if (worse === 'normal') assert.is(view.reason, 'syncing as usual', label);
    if (syncPart === 'yellow' && rank[eventsPart] < rank[syncPart]) assert.match(view.reason, /^trouble syncing/, label);
  }
});

test('a decoder that stopped: yellow after two minutes, red after five, and the reason says the report is old', () => {
  const stoppedAgo = (ms: number) => healthy({ reportedAt: ago(ms), slotLagBytes: 0, loggedThrough: ago(ms) });
  assert.is(indicatorOf(stoppedAgo(60_000), NOW), 'normal', 'a recent report, caught up');
  assert.is(eventsLagSeconds(stoppedAgo(60_000), NOW), 0);
  const yellow = statusOf(stoppedAgo(150_000), NOW);
  assert.is(yellow.indicator, 'yellow');
  assert.is(yellow.events_lag_seconds, 150);
  assert.is(yellow.reason, 'events behind: changes of the last 150 s may not be events yet, and the decoder last reported 150 s ago');
  const red = statusOf(stoppedAgo(400_000), NOW);
  assert.is(red.indicator, 'red');
  assert.match(red.reason, /^events stopped: changes of the last 400 s/);
});

test('a decoder that reports but is stuck: its log stays behind while its reports go on', () => {
  // Reported 5 s ago; the log reaches no further than 3 minutes ago; 40 MB of WAL to read.
  const stuck = statusOf(healthy({ reportedAt: ago(5_000), slotLagBytes: 40_000_000, loggedThrough: ago(180_000) }), NOW);
  assert.is(stuck.indicator, 'yellow');
  assert.is(stuck.events_lag_seconds, 180);
  assert.is(stuck.reason, 'events behind: changes of the last 180 s may not be events yet');
});

test('no report yet: no figure, and the events part stays out of the indicator', () => {
  const fresh = statusOf(healthy(), NOW);
  assert.is(fresh.events_lag_seconds, null);
  assert.is(fresh.indicator, 'normal');
  const noReach = statusOf(healthy({ reportedAt: ago(1_000), slotLagBytes: null, loggedThrough: null }), NOW);
  assert.is(noReach.events_lag_seconds, null);
});

test.run();
