/**
 * An idle sync costs its servers little.
 * - It keeps its database connection. A quiet Stripe account's sync still touches its database
 *   every 15 s (`_sync_meta`); were its pool to close an idle connection sooner, each touch
 *   would start a server process, and a server of hundreds of idle syncs would spend a large
 *   share of its CPU starting and ending sessions.
 * - Its leases are renewed a few times a lease, not at every tick of the worker: each renewal
 *   rewrites the sync's row in the control database, which with hundreds of syncs made most of
 *   that database's writes.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

let s: StripeSyncSetUp;

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_KEPTCONNECTIONKEPTCONN0',
    seed: 7,
    customers: 3,
    pollIntervalMs: 1000,
    config: { roles: ['api', 'sync', 'decoder'] },
    tunables: { workerTickMs: 100 },
  });
});

test.after(async () => {
  await s?.svc.stop();
  await s?.fake.close();
});

test('a quiet sync opens no new session to its database over 32 s', async () => {
  const database = new URL(s.reader).pathname.slice(1);
  // The service's sessions on the sync database (not the walsender's, not this test's).
  const sessions = async () =>
    (
      await query<{ session: string }>(
        serverAdminUrl(),
        `SELECT pid || '@' || backend_start AS session FROM pg_stat_activity
          WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
        [database],
      )
    ).map((r) => r.session);
  // The backfill's extra connections end, and the one left is in use.
  await new Promise((r) => setTimeout(r, 12_000));
  const seen = new Set(await sessions());
  const started: string[] = [];
  for (const end = Date.now() + 32_000; Date.now() < end; ) {
    for (const session of await sessions()) if (!seen.has(session)) started.push(session) && seen.add(session);
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.ok(seen.size > 0, 'the sync holds a connection');
  assert.equal(started, [], `new sessions while the account was quiet: ${started.join(', ')}`);
});

test('its runner and decoder leases are renewed every third of the lease, not at every tick', async () => {
  const leases = async () =>
    (
      await query<{ runner: string; decoder: string }>(
        s.svc.controlUrl,
        'SELECT lease_until::text AS runner, decoder_lease_until::text AS decoder FROM syncs WHERE id = $1',
        [s.syncId],
      )
    )[0]!;
  const runner = new Set<string>();
  const decoder = new Set<string>();
  // 12 s: 120 ticks of the worker; a 30 s lease is renewed at most twice in it.
  for (const end = Date.now() + 12_000; Date.now() < end; ) {
    const now = await leases();
    runner.add(now.runner);
    decoder.add(now.decoder);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(runner.size >= 1 && runner.size <= 3, `the runner's lease took ${runner.size} values`);
  assert.ok(decoder.size >= 1 && decoder.size <= 3, `the decoder's lease took ${decoder.size} values`);
});

test.run();
