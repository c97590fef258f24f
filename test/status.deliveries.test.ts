/**
 * The status covers the delivery paths too. Before, a sync whose webhook receiver failed for
 * an hour, or whose Kafka relay stood still, showed `normal`, "syncing as usual": the
 * indicator saw the sync's cycles and, lately, the event log, nothing after it. Now each
 * path's lag (the age of the oldest logged event it has not delivered) is read from the
 * control database and the worst part of the path decides the indicator. Checked over
 * generated statuses, then on a real API with a real deliverer and a receiver that fails and
 * heals, and a relay cursor that stands still and moves.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { deliveriesBehind } from '../src/control/delivery-lag.ts';
import { EVENTS_BEHIND_YELLOW_MS, RED_AFTER_MS, statusOf } from '../src/control/status.ts';
import { ago, healthyStatus, NOW } from './harness/status-fields.ts';
import { advanceRelayCursor } from '../src/events/kafka/cursor.ts';
import { request, startWebhookWorld, until, type WebhookWorld } from './harness/webhooks.ts';

const healthy = healthyStatus;

test('the indicator is the worst of the sync, its event log and its deliveries, over generated statuses', () => {
  const rank = { normal: 0, yellow: 1, red: 2 } as const;
  const part = (lagMs: number) => (lagMs >= RED_AFTER_MS ? 'red' : lagMs >= EVENTS_BEHIND_YELLOW_MS ? 'yellow' : 'normal');
  let x = 11;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  for (let i = 0; i < 2000; i++) {
    const eventsMs = Math.floor(next() * 600_000);
    const deliveryMs = next() < 0.3 ? undefined : Math.floor(next() * 600_000);
    const failing = next() < 0.2;
    // A key rejected: red, and its reason, whatever lags behind it.
    const fatal = failing && next() < 0.3;
    const fields = healthy({
      events: { reportedAt: ago(eventsMs), slotLagBytes: 50_000_000, loggedThrough: ago(eventsMs) },
      deliveries: deliveryMs === undefined ? null : { path: 'webhook wh_x', since: ago(deliveryMs), failingSince: ago(deliveryMs), lastError: 'HTTP 500' },
      ...(failing ? { lastError: 'upstream answered 500', lastErrorAt: ago(1_000), lastErrorKind: fatal ? ('fatal' as const) : ('transient' as const) } : {}),
    });
    const view = statusOf(fields, NOW);
    const parts = {
      sync: fatal ? 'red' : failing ? 'yellow' : 'normal',
      events: part(eventsMs),
      deliveries: deliveryMs === undefined ? 'normal' : part(deliveryMs),
    } as const;
    const worst = Object.values(parts).reduce((a, b) => (rank[b] > rank[a] ? b : a));
    const label = JSON.stringify({ eventsMs, deliveryMs, failing, fatal, view: view.indicator, reason: view.reason });
    assert.is(view.indicator, worst, label);
    assert.is(view.deliveries_lag_seconds, deliveryMs === undefined ? 0 : Math.round(deliveryMs / 1000), label);
    assert.is(view.deliveries_behind, deliveryMs === undefined ? null : 'webhook wh_x', label);
    if (fatal) assert.is(view.reason, 'stopped: upstream answered 500', label);
    // The reason is the deciding part's: the deliveries' when no part is worse.
    else if (parts.deliveries !== 'normal' && rank[parts.deliveries] >= rank[worst]) {
      assert.match(
        view.reason,
        /^deliveries (behind|stopped): webhook wh_x has not delivered the events of the last \d+ s; its latest attempt failed: HTTP 500$/,
        label,
      );
    }
    if (worst === 'normal') assert.is(view.reason, 'syncing as usual', label);
  }
  // Not read (a process that does not look): no figure, and no share of the indicator.
  assert.is(statusOf(healthy(), NOW).deliveries_lag_seconds, null);
});

let world: WebhookWorld;

test.before(async () => {
  world = await startWebhookWorld();
});
test.after(async () => {
  await world?.stop();
});

const status = async (syncId: string) => {
  const answer = await request(world.apiUrl, 'GET', `/api/syncs/${syncId}`, { token: world.account.token });
  assert.is(answer.status, 200, answer.text);
  return answer.body.status as { indicator: string; reason: string; deliveries_lag_seconds: number | null; deliveries_behind: string | null };
};

test('a failing webhook receiver shows in the status, named, with its failure; healed, the status is clear again', async () => {
  const syncId = await world.newSync();
  const receiver = await world.receiver();
  receiver.behaviour = () => 500;
  const hook = await world.createWebhook(syncId, { url: receiver.url, topics: [`svc.${syncId}.customer`] });
  world.deliver(syncId);
  assert.equal((await status(syncId)).deliveries_lag_seconds, 0, 'nothing logged: nothing behind');
  await world.log(syncId, [{ id: 'cus_1', kind: 'inserted' }]);
  await until('the receiver refused the event twice', () => receiver.requests.length >= 2);
  await until('the webhook a second behind', async () => ((await status(syncId)).deliveries_lag_seconds ?? 0) >= 1);
  const behind = await status(syncId);
  assert.is(behind.deliveries_behind, `webhook ${hook.id}`);
  // Two minutes on, the same rows make it yellow, and the reason says which and why.
  const read = (await deliveriesBehind(world.pool, [syncId], { kafka: false })).get(syncId)!;
  const later = statusOf(healthy({ deliveries: read }), new Date(read.since.getTime() + 150_000));
  assert.is(later.indicator, 'yellow');
  assert.match(
    later.reason,
    new RegExp(`^deliveries behind: webhook ${hook.id} has not delivered the events of the last 150 s; its latest attempt failed: .*500`),
  );
  const metrics = await request(world.apiUrl, 'GET', '/metrics', { token: world.adminToken });
  assert.match(metrics.text, new RegExp(`tributary_sync_deliveries_lag_seconds\\{sync_id="${syncId}",kind="stripe"\\} [1-9]`));

  receiver.behaviour = () => 204;
  await until('the event delivered', () => receiver.accepted.length === 1);
  await until('the status clear again', async () => (await status(syncId)).deliveries_lag_seconds === 0);
  assert.is((await status(syncId)).deliveries_behind, null);
});

test('a Kafka relay whose cursor stands still shows in the status; moved on, it is clear; with no Kafka, a stale cursor is no path', async () => {
  // A service that relays to Kafka (the broker itself is not needed: only the relay's cursor is read).
  const kafkaWorld = await startWebhookWorld({ kafkaBrokers: ['127.0.0.1:9'] });
  try {
    const status = async (syncId: string) =>
      (await request(kafkaWorld.apiUrl, 'GET', `/api/syncs/${syncId}`, { token: kafkaWorld.account.token })).body.status as {
        deliveries_lag_seconds: number | null;
        deliveries_behind: string | null;
      };
    const syncId = await kafkaWorld.newSync();
    await kafkaWorld.log(syncId, [
      { id: 'cus_1', kind: 'inserted' },
      { id: 'cus_2', kind: 'inserted' },
    ]);
    // A relay that started and never got further: its cursor before the first event.
    await advanceRelayCursor(kafkaWorld.pool, syncId, '0');
    await until('the relay a second behind', async () => ((await status(syncId)).deliveries_lag_seconds ?? 0) >= 1);
    assert.is((await status(syncId)).deliveries_behind, 'kafka');
    const read = (await deliveriesBehind(kafkaWorld.pool, [syncId], { kafka: true })).get(syncId)!;
    const stopped = statusOf(healthy({ deliveries: read }), new Date(read.since.getTime() + 400_000));
    assert.is(stopped.indicator, 'red');
    assert.is(stopped.reason, 'deliveries stopped: the Kafka relay has not delivered the events of the last 400 s');
    const { rows } = await kafkaWorld.pool.query<{ seq: string }>('SELECT seq::text AS seq FROM decoder_progress WHERE sync_id = $1', [syncId]);
    await advanceRelayCursor(kafkaWorld.pool, syncId, rows[0]!.seq);
    const clear = await status(syncId);
    assert.equal([clear.deliveries_lag_seconds, clear.deliveries_behind], [0, null]);
  } finally {
    await kafkaWorld.stop();
  }

  // A service that relays to no Kafka now: a cursor left from when it did stands still for
  // good, and must not turn every sync red.
  const syncId = await world.newSync();
  await world.log(syncId, [{ id: 'cus_1', kind: 'inserted' }]);
  await advanceRelayCursor(world.pool, syncId, '0');
  await new Promise((r) => setTimeout(r, 1100));
  const view = await status(syncId);
  assert.equal([view.deliveries_lag_seconds, view.deliveries_behind], [0, null]);
});

test.run();
