/**
 * A path to the sync databases' server that stops passing bytes without closing (a relay
 * in front of the server that stops reading: no error, no close, as a network that lost its
 * route does). A crash closes sockets at once, so nothing else made this fault. Before, the
 * decoder's replication session waited on the dead socket forever: the changes made during
 * the hang, and every one after it, never became events, and the slot-lag report queued
 * behind its own hung statement for good. Now the session pings the server when it has been
 * silent a while and gives up on a ping unanswered, and short statements have a deadline, so
 * once the path heals every change is logged and the lag report moves again.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RestTail } from '../sim/check/rest-events.ts';
import type { TcpRelay } from '../sim/tcp-relay.ts';
import { tunablesFromEnv } from '../src/main.ts';
import { REPLICATION_SILENCE_MS } from '../src/decoder/replication.ts';
import { SYNC_DB_QUERY_TIMEOUT_MS } from '../src/sync/runners.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { loudSetUp } from './harness/service.ts';
import { backfilledStripeSync, directSyncDatabase, relayToServer, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const SILENCE_MS = 3000;
let relay: TcpRelay;
let s: StripeSyncSetUp;
let direct: pg.Pool;
let control: pg.Pool;
let tail: RestTail;

test.before(
  loudSetUp(
    async () => {
      relay = await relayToServer();
      s = await backfilledStripeSync({
        key: 'sk_test_HUNGPATHHUNGPATH0000000',
        seed: 61,
        customers: 5,
        // The sync itself stays idle: the decoder's path is the one under test.
        pollIntervalMs: 120_000,
        config: { roles: ['api', 'sync', 'decoder', 'events'], targetDatabaseUrl: relay.through(serverAdminUrl()) },
        tunables: { decoder: { silenceMs: SILENCE_MS, lagReportMs: 500, retryMs: 200 }, syncDbQueryTimeoutMs: 5000 },
      });
      control = new pg.Pool({ connectionString: s.svc.controlUrl, max: 2 });
      direct = new pg.Pool({ connectionString: await directSyncDatabase(s.svc.controlUrl, s.syncId), max: 2 });
      tail = new RestTail(
        { restUrl: `http://127.0.0.1:${s.svc.service.eventsPort}`, username: s.account.eventsUsername, password: s.account.eventsPassword },
        `svc.${s.syncId}.`,
      );
    },
    () => s?.svc,
  ),
);

test.after(async () => {
  relay?.heal();
  await s?.svc.stop();
  await s?.fake.close();
  await direct?.end();
  await control?.end();
  await relay?.close();
});

/** Renames every customer straight in the sync database (not through the relay); the new names. */
async function renameAll(tag: string): Promise<string[]> {
  const { rows } = await direct.query<{ name: string }>(`UPDATE customer SET name = $1 || ' ' || id RETURNING name`, [tag]);
  return rows.map((r) => r.name).sort();
}

/** Waits until the REST log holds an `updated` event for each of `names`. */
async function logged(names: string[], within: number): Promise<void> {
  const seen = new Set<string>();
  await waitFor(
    `events for ${names.length} renames`,
    async () => {
      for (const event of await tail.next()) {
        const value = JSON.parse(event.value) as { event: string; data?: { name?: string } };
        if (value.event === 'updated' && value.data?.name) seen.add(value.data.name);
      }
      return names.every((n) => seen.has(n)) ? true : undefined;
    },
    within,
  );
}

const lagAt = async () =>
  (await control.query<{ at: Date | null }>('SELECT lag_at AS at FROM decoder_progress WHERE sync_id = $1', [s.syncId])).rows[0]?.at?.getTime() ?? 0;

test('a hung path to the sync server: the decoder notices, reconnects once it heals, and logs every change', async () => {
  await tail.next();
  await logged(await renameAll('before'), 30_000);

  relay.hang();
  const during = await renameAll('during');
  // Healed before the silence bound: only a session that notices its dead socket gets going again.
  await new Promise((r) => setTimeout(r, SILENCE_MS / 2));
  relay.heal();
  const healedAt = Date.now();
  const after = await renameAll('after');
  // The bound: the silence, a reconnect, and slack for a loaded machine.
  await logged([...during, ...after], SILENCE_MS + 20_000);
  const took = Date.now() - healedAt;
  assert.ok(
    s.svc.logs.lines.some((l) => l.includes('replication stream silent')),
    'the decoder said why it reconnected',
  );
  // The slot-lag report, whose statement hung with the path, reports again: the WAL moves by
  // 2 MB, past what the report skips as unchanged.
  const healedLag = Date.now();
  await direct.query(`SELECT pg_logical_emit_message(false, 'hung-path-test', repeat('x', 2000000))`);
  await waitFor('a slot-lag report after the heal', async () => ((await lagAt()) > healedLag ? true : undefined), SILENCE_MS + 20_000);
  assert.ok(took < SILENCE_MS + 20_000, `${took} ms`);
  // The status's events part: the log reaches the database again.
  const view = await waitFor('the status to show the log caught up', async () => {
    const v = await s.view();
    return v.status.events_lag_seconds === 0 ? v : undefined;
  });
  assert.is(view.status.indicator, 'normal', view.status.reason);
});

test('a path hung longer than the bound: reconnects fail in time, not forever, and the stream resumes', async () => {
  relay.hang();
  const during = await renameAll('long');
  // Past the silence bound and a connect attempt or two into the hung path.
  await new Promise((r) => setTimeout(r, SILENCE_MS * 3));
  relay.heal();
  await logged(during, 40_000);
  const still = await renameAll('later');
  await logged(still, 20_000);
});

test('the bound is 30 s unless the operator sets TRIBUTARY_DECODER_SILENCE_S', () => {
  assert.is(REPLICATION_SILENCE_MS, 30_000);
  assert.equal(tunablesFromEnv({ TRIBUTARY_DECODER_SILENCE_S: '45' }), { decoder: { silenceMs: 45_000 } });
  for (const bad of ['2', '1.5', 'soon', '9999']) {
    assert.throws(
      () => tunablesFromEnv({ TRIBUTARY_DECODER_SILENCE_S: bad }),
      /TRIBUTARY_DECODER_SILENCE_S: expected a whole number of seconds from 5 to 3600/,
    );
  }
});

test('a sync statement has a deadline too, 5 min unless the operator sets TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S', () => {
  assert.is(SYNC_DB_QUERY_TIMEOUT_MS, 300_000);
  assert.equal(tunablesFromEnv({ TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S: '60' }), { syncDbQueryTimeoutMs: 60_000 });
  assert.throws(
    () => tunablesFromEnv({ TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S: '5' }),
    /TRIBUTARY_SYNC_DB_QUERY_TIMEOUT_S: expected a whole number of seconds from 10/,
  );
});

test.run();
