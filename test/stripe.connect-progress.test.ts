/**
 * How far connected accounts are, and what they cannot read: while their backfills run, the
 * sync's status counts the accounts backfilled of those followed and the objects written, as
 * each account finishes, and keeps the counts once all are done, through the platform's own
 * cycles; every account's core tables are ready before any account is done; the console says
 * it in words. Lists every account refuses make one warning, not
 * one per account, which goes once the accounts read them again.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

// The console's own rendering of a status (browser JavaScript, untyped).
const consoleStatus: {
  progressOf(status: unknown): { label: string } | null;
  accountsOf(status: unknown): { words: string } | null;
} = await import(new URL('../src/console/status.js', import.meta.url).href);

interface View {
  status: { progress: Record<string, any> | null; completed_at: string };
  warnings: string[];
}

let s: StripeSyncSetUp;
const accounts: string[] = [];
/** Each connected account refuses these once (a 403, as for a product not enabled); the platform never does. */
const REFUSED = ['/v1/coupons', '/v1/tax_rates'];
/** Every view read while the accounts' backfills ran. */
const seen: View[] = [];
let done: View;

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_CONNECTPROGRESSPLATFORM1',
    seed: 64,
    customers: 2,
    pollIntervalMs: 300,
    settings: { connected_accounts: true },
    tunables: { stripe: { pollIntervalMs: 300, discoverAccountsMs: 3000 } },
    before: async (stripe, fake) => {
      for (const name of ['a', 'b', 'c']) {
        const account = await stripe.accounts.create({ type: 'custom', email: `${name}@example.com` });
        accounts.push(account.id);
        await stripe.products.create({ name: `Product of ${name}` }, { stripeAccount: account.id });
        await stripe.customers.create({ email: `first@${name}.example.com` }, { stripeAccount: account.id });
        for (const path of REFUSED) fake.faults.add({ match: { method: 'GET', path, acting: account.id }, kind: 'status', status: 403, times: 1 });
      }
      // One account slower than the others: the count is seen between 0 and 3.
      fake.faults.add({ match: { method: 'GET', path: '/v1/customers', acting: accounts[2] }, kind: 'delay', delayMs: 3000, times: 1 });
    },
  });
});
test.after(async () => {
  await s.svc.stop();
  await s.fake.close();
});

const view = async (): Promise<View> => (await s.view()) as View;
const connectedWarnings = (v: View) => v.warnings.filter((w) => w.startsWith('connected accounts:'));

test('the status counts the accounts backfilled as each finishes, and keeps the counts once all are', async () => {
  done = await waitFor(
    'every account backfilled',
    async () => {
      const v = await view();
      seen.push(v);
      const p = v.status.progress;
      return p?.accounts_total === 3 && p.accounts_done === 3 ? v : undefined;
    },
    60_000,
  );
  const counts = seen.map((v) => v.status.progress?.accounts_done).filter((n): n is number => typeof n === 'number');
  assert.ok(
    counts.every((n, i) => i === 0 || n >= counts[i - 1]!),
    `never backwards: ${counts.join(',')}`,
  );
  // Every account's core tables come before the rest of any account.
  const oneDone = seen.filter((v) => v.status.progress?.accounts_total === 3 && v.status.progress.accounts_done >= 1);
  assert.ok(oneDone.length > 0);
  for (const v of oneDone) assert.is(v.status.progress!.accounts_core_ready, 3, 'all core tables ready once one account is done');
  const between = seen.find((v) => v.status.progress?.accounts_total === 3 && v.status.progress.accounts_done > 0 && v.status.progress.accounts_done < 3);
  assert.ok(between, `a count between none and all was shown: ${counts.join(',')}`);
  // The console: a bar while some are not done, words a user reads.
  assert.match(
    consoleStatus.progressOf(between!.status)?.label ?? '',
    /^Connected accounts: [12] of 3 backfilled, [\d,]+ objects(; core tables ready in [23])?$/,
  );

  // The objects their backfills wrote: every connected account's row, each read once.
  const tables = await query<{ table_name: string }>(
    s.reader,
    "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'stripe_account'",
  );
  const rows = await query<{ n: string }>(
    s.reader,
    `SELECT sum(n)::text AS n FROM (${tables.map((t) => `SELECT count(*) AS n FROM public."${t.table_name}" WHERE stripe_account IS NOT NULL`).join(' UNION ALL ')}) c`,
  );
  const objects = done.status.progress!.accounts_objects as number;
  assert.is(objects, Number(rows[0]!.n));
  assert.ok(objects >= 6, 'at least the products and customers made');
  assert.is(consoleStatus.progressOf(done.status), null, 'no bar once all are done');
  assert.is(consoleStatus.accountsOf(done.status)?.words, `3 of 3 backfilled, ${objects.toLocaleString('en-US')} objects`);

  // The platform's own cycles clear their progress, not the accounts'.
  await s.stripe.customers.create({ email: 'platform@example.com' });
  const later = await waitFor('a cycle of the platform', async () => {
    const v = await view();
    return Date.parse(v.status.completed_at) > Date.parse(done.status.completed_at) ? v : undefined;
  });
  assert.equal(later.status.progress, { accounts_done: 3, accounts_core_ready: 3, accounts_total: 3, accounts_objects: objects });
});

test("lists the accounts cannot read are one warning, written when the accounts' backfills settle", async () => {
  const v = await waitFor('the warning', async () => {
    const found = await view();
    return connectedWarnings(found).some((w) => w.endsWith('in 3 of 3 accounts')) ? found : undefined;
  });
  const warnings = connectedWarnings(v);
  assert.is(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, /^connected accounts: 2 lists cannot be read \(\/v1\/coupons: 403: [^;]+; \/v1\/tax_rates: 403: [^)]+\) in 3 of 3 accounts$/);
  assert.equal(
    v.warnings.filter((w) => REFUSED.some((list) => w.includes(list))),
    warnings,
    'the platform read them',
  );
  // Not rewritten at each account's end: at most a first one while the backfills ran, and this.
  const texts = new Set(seen.flatMap(connectedWarnings));
  texts.delete(warnings[0]!);
  assert.ok([...texts].every((w) => w.endsWith('in the accounts backfilled so far')) && texts.size <= 1, [...texts].join('\n'));
});

test('the warning goes once the accounts read those lists again', async () => {
  assert.is(s.fake.faults.active, 0, 'every refusal was met once');
  // Every feed goes dark for 31 days: each account is backfilled again, its lists read anew.
  const before = await view();
  assert.is(connectedWarnings(before).length, 1);
  s.fake.faults.add({ match: { path: '/v1/events', account: s.upstream.id }, kind: 'status', status: 500, times: Infinity });
  await new Promise((r) => setTimeout(r, 800));
  s.fake.clock.advance(31 * 86_400_000);
  s.fake.faults.clear();
  await waitFor(
    "the platform's new backfill",
    async () => (Date.parse((await view()).status.completed_at) > Date.parse(before.status.completed_at) ? true : undefined),
    60_000,
  );
  const cleared = await waitFor(
    'the warning gone',
    async () => {
      const v = await view();
      return connectedWarnings(v).length === 0 ? v : undefined;
    },
    90_000,
  );
  assert.is(cleared.status.progress?.accounts_total, 3);
});

test.run();
