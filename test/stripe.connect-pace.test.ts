/**
 * Reads of connected accounts' feeds are paced all together (half the sync's share by
 * default): however many accounts are busy, the rest of the share stays for the platform's
 * own feed, backfills and previews, and the share is not spent to its last request, which
 * left the customer's own requests no room (a simulation run without push found a 429).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { withDatabase } from '../src/db/sql.ts';
import { query, serverAdminUrl } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const PACE = 2;
let s: StripeSyncSetUp;
const accounts: string[] = [];

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_CONNECTPACEPLATFORM0001',
    seed: 63,
    customers: 2,
    // Feeds read every 50 ms were each account left to itself: 20 reads a second apiece.
    pollIntervalMs: 50,
    settings: { connected_accounts: true },
    tunables: { stripe: { pollIntervalMs: 50, discoverAccountsMs: 500, connectPollsPerSecond: PACE } },
    before: async (stripe) => {
      for (let i = 0; i < 2; i++) {
        const account = await stripe.accounts.create({ type: 'custom' });
        accounts.push(account.id);
        await stripe.customers.create({ email: `pace${i}@example.com` }, { stripeAccount: account.id });
      }
    },
  });
});
test.after(async () => {
  await s.svc.stop();
  await s.fake.close();
});

test('busy connected accounts are read no faster than the pace, all together', async () => {
  // The bookkeeping is out of the reader's sight: the database's owner reads it.
  const admin = withDatabase(serverAdminUrl(), (await s.view()).database.name);
  await waitFor(
    'both accounts backfilled',
    async () => {
      const done = await query(admin, "SELECT 1 FROM public_swap._state WHERE key LIKE 'stripe.backfill@%' AND value ? 'completedAt'");
      return done.length === 2 ? true : undefined;
    },
    60_000,
  );
  const reads = () => accounts.reduce((n, a) => n + s.fake.stats.byActing(a, '/v1/events').requests, 0);
  const before = reads();
  const started = Date.now();
  await new Promise((r) => setTimeout(r, 5000));
  const perSecond = (reads() - before) / ((Date.now() - started) / 1000);
  // Freshly backfilled, both accounts count as busy (read every 50 ms each, left alone).
  assert.ok(perSecond <= PACE * 1.3, `${perSecond.toFixed(1)} reads a second of connected feeds, paced to ${PACE}`);
  assert.ok(perSecond >= PACE * 0.5, `${perSecond.toFixed(1)} reads a second: the feeds are still read`);
});

test.run();
