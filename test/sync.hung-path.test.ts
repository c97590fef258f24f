/**
 * A sync's own path to its database hangs (a relay that stops passing bytes without closing)
 * for longer than its statement deadline, while changes keep coming upstream: once the path
 * heals, the sync writes again, every change made meanwhile with it, within a connect's
 * deadline, a statement's and a back-off. The pieces that make it so are tested one by one in
 * db.hung-path.test (a connect deadline, idle connections dropped after a timeout); this is
 * the whole of it, with a real Stripe sync.
 */
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { TcpRelay } from '../sim/tcp-relay.ts';
import { serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { loudSetUp } from './harness/service.ts';
import { backfilledStripeSync, directSyncDatabase, politely, relayToServer, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const QUERY_TIMEOUT_MS = 1000;
/** Long enough for the sync to use up its pooled connections and open new ones into the hang. */
const HANG_MS = 18_000;
let relay: TcpRelay;
let s: StripeSyncSetUp;
let direct: pg.Pool;

test.before(
  loudSetUp(
    async () => {
      relay = await relayToServer();
      s = await backfilledStripeSync({
        key: 'sk_test_SYNCHUNGPATH000000000',
        seed: 71,
        customers: 3,
        pollIntervalMs: 300,
        config: { roles: ['api', 'sync'], targetDatabaseUrl: relay.through(serverAdminUrl()) },
        tunables: { syncDbQueryTimeoutMs: QUERY_TIMEOUT_MS },
      });
      direct = new pg.Pool({ connectionString: await directSyncDatabase(s.svc.controlUrl, s.syncId), max: 1 });
    },
    () => s?.svc,
  ),
);

test.after(async () => {
  relay?.heal();
  await s?.svc.stop();
  await s?.fake.close();
  await direct?.end();
  await relay?.close();
});

/** Renames the `nth` customer upstream (each step its own, so no rename hides another); the new name. */
async function rename(tag: string, nth: number): Promise<string> {
  const { data } = await politely(() => s.stripe.customers.list({ limit: 3 }));
  const name = `${tag} ${Date.now()}`;
  await politely(() => s.stripe.customers.update(data[nth]!.id, { name }));
  return name;
}

const inDatabase = (name: string, within: number) =>
  waitFor(
    `"${name}" in the sync database`,
    async () => ((await direct.query('SELECT 1 FROM customer WHERE name = $1', [name])).rowCount ? true : undefined),
    within,
  );

test('a sync whose path hung past its statement deadline writes again once the path heals', async () => {
  await inDatabase(await rename('before', 0), 20_000);
  relay.hang();
  const during = await rename('during', 1);
  // Long past the statement deadline: the pooled connections are dropped and new ones are
  // opened into the hung path.
  await new Promise((r) => setTimeout(r, HANG_MS));
  relay.heal();
  const healedAt = Date.now();
  const after = await rename('after', 2);
  // The bound: a connect's deadline (10 s), a statement's, and slack for a loaded machine.
  await inDatabase(during, 10_000 + QUERY_TIMEOUT_MS + 20_000);
  await inDatabase(after, 10_000);
  assert.ok(Date.now() - healedAt < 10_000 + QUERY_TIMEOUT_MS + 30_000, `${Date.now() - healedAt} ms after the heal`);
});

test.run();
