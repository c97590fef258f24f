/**
 * The status covers the decoder, seen from outside: a decoder whose path to its server hangs,
 * and a decoder that stopped, turn the sync yellow and then red in the API's answer and the
 * metrics, with a reason that names the event log, and `normal` again once the part is back.
 * Before, the rule was checked only over generated statuses (status.events-lag.test); here a
 * real decoder runs in a service of its own (the `decoder` role, as a split deployment runs
 * it) beside the API and the sync, reaching the sync databases' server through a relay that
 * can stop passing bytes. The bounds are shortened (Tunables.status): yellow at 12 s behind,
 * red at 25 s, a report older than 9 s no proof of being caught up.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { TcpRelay } from '../sim/tcp-relay.ts';
import type { Tunables } from '../src/main.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { loudSetUp, request, startTestService, type TestService } from './harness/service.ts';
import { backfilledStripeSync, politely, relayToServer, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const BOUNDS = { behindYellowMs: 12_000, redAfterMs: 25_000, reportFreshMs: 9000 };
const SILENCE_MS = 3000;
/** What a loaded machine may add to a bound before the test calls it a fault. */
const SLACK_MS = 20_000;
const DECODER_TUNABLES: Tunables = { decoder: { silenceMs: SILENCE_MS, lagReportMs: 500, lagRewriteMs: 3000, retryMs: 200, leaseMs: 3000 }, status: BOUNDS };

let relay: TcpRelay;
let s: StripeSyncSetUp;
let decoder: TestService | undefined;

/** A service that runs only the decoder role, on the same control database, through the relay. */
const startDecoder = () =>
  startTestService({
    config: {
      roles: ['decoder'],
      databaseUrl: s.svc.controlUrl,
      adminToken: s.svc.adminToken,
      dataDir: s.svc.dataDir,
      targetDatabaseUrl: relay.through(serverAdminUrl()),
    },
    tunables: DECODER_TUNABLES,
  });

test.before(
  loudSetUp(
    async () => {
      relay = await relayToServer();
      s = await backfilledStripeSync({
        key: 'sk_test_FROZENPARTS00000000000',
        seed: 67,
        customers: 3,
        pollIntervalMs: 500,
        // The API and the sync here, straight to the server; the decoder apart.
        config: { roles: ['api', 'sync'] },
        tunables: { status: BOUNDS },
      });
      decoder = await startDecoder();
    },
    () => s?.svc,
  ),
);

test.after(async () => {
  relay?.heal();
  await decoder?.stop();
  await s?.svc.stop();
  await s?.fake.close();
  await relay?.close();
});

interface Status {
  indicator: string;
  reason: string;
  events_lag_seconds: number | null;
}

const status = async (): Promise<Status> => (await s.view()).status;

/** Waits until the status passes `check`; the status it passed with. */
const statusUntil = (what: string, check: (st: Status) => boolean, within: number) =>
  waitFor(
    what,
    async () => {
      const st = await status();
      return check(st) ? st : undefined;
    },
    within,
  );

/** A change upstream that the sync brings into the database: a customer renamed. */
async function change(tag: string): Promise<void> {
  const { data } = await politely(() => s.stripe.customers.list({ limit: 1 }));
  await politely(() => s.stripe.customers.update(data[0]!.id, { name: `${tag} ${Date.now()}` }));
}

const caughtUp = (st: Status) => st.indicator === 'normal' && st.events_lag_seconds === 0;

test('a hung path to the decoder\'s server: yellow "events behind" within its bound, the session replaced, normal once it heals', async () => {
  await statusUntil('the log caught up', caughtUp, 60_000);
  relay.hang();
  await change('during the hang');
  const yellow = await statusUntil('yellow', (st) => st.indicator === 'yellow', BOUNDS.behindYellowMs + SLACK_MS);
  assert.match(
    yellow.reason,
    /^events behind: changes of the last \d+ s may not be events yet, and the decoder last reported \d+ s ago$/,
    JSON.stringify(yellow),
  );
  assert.ok(yellow.events_lag_seconds! * 1000 >= BOUNDS.behindYellowMs, JSON.stringify(yellow));
  // The service replaced the session on its own, and said what and why in one line.
  assert.ok(
    decoder!.logs.lines.some((l) => l.includes('replication stream silent')),
    'the decoder said why it gave up the session',
  );
  relay.heal();
  await statusUntil('normal again', caughtUp, SILENCE_MS + SLACK_MS);
});

test('a stopped decoder: yellow, then red "events stopped" in the API and the metrics; a decoder back makes it normal', async () => {
  await statusUntil('the log caught up', caughtUp, 60_000);
  await decoder!.stop();
  decoder = undefined;
  await change('while no decoder runs');
  const yellow = await statusUntil('yellow', (st) => st.indicator === 'yellow', BOUNDS.behindYellowMs + SLACK_MS);
  assert.match(yellow.reason, /^events behind: .*the decoder last reported \d+ s ago$/, JSON.stringify(yellow));
  const red = await statusUntil('red', (st) => st.indicator === 'red', BOUNDS.redAfterMs + SLACK_MS);
  // Red for its reason: the log's reach is the bound behind. Not timed from the stop: on a loaded
  // machine the decoder's reach was already 15 s behind when it stopped (red 10.5 s after).
  assert.ok(red.events_lag_seconds! * 1000 >= BOUNDS.redAfterMs, JSON.stringify(red));
  assert.match(red.reason, /^events stopped: changes of the last \d+ s may not be events yet, and the decoder last reported \d+ s ago$/, JSON.stringify(red));
  const metrics = await request(s.svc.api, 'GET', '/metrics', { token: s.svc.adminToken });
  const lag = Number(new RegExp(`tributary_sync_events_lag_seconds\\{sync_id="${s.syncId}",kind="stripe"\\} (\\d+)`).exec(metrics.text)?.[1]);
  assert.ok(lag * 1000 >= BOUNDS.redAfterMs - 1000, `metrics: ${lag} s behind`);

  const loggedBefore = (await s.view()).events.logged as number;
  decoder = await startDecoder();
  await statusUntil('normal again', caughtUp, SLACK_MS);
  // The change made while none ran is an event now.
  await waitFor('the change logged', async () => (((await s.view()).events.logged as number) > loggedBefore ? true : undefined), SLACK_MS);
});

test.run();
