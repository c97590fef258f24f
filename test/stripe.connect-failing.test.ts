/**
 * One connected account whose feed keeps failing (Stripe answering its reads 500) while a wait
 * is pending: the platform's own feed and the other accounts' go on reaching the database, the
 * wait times out rather than answer `ok` over the account it could not read, and once the
 * account's feed answers again a wait answers `ok` with its changes in.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { request } from './harness/service.ts';
import { backfilledStripeSync, politely, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const KEY = 'sk_test_CONNECTFAILINGFEED0000001';
let s: StripeSyncSetUp;
const accounts: Record<'a' | 'b', string> = { a: '', b: '' };

test.before(async () => {
  s = await backfilledStripeSync({
    key: KEY,
    seed: 67,
    customers: 2,
    pollIntervalMs: 300,
    settings: { connected_accounts: true },
    tunables: { stripe: { pollIntervalMs: 300, discoverAccountsMs: 3000 } },
    before: async (stripe) => {
      for (const name of ['a', 'b'] as const) {
        const account = await stripe.accounts.create({ type: 'custom', email: `${name}@example.com` });
        accounts[name] = account.id;
        await stripe.customers.create({ email: `first@${name}.example.com` }, { stripeAccount: account.id });
      }
    },
  });
  // Both backfills complete (an account's feed is read only after its backfill), as the status says.
  await waitFor(
    'both accounts backfilled',
    async () => {
      const progress = ((await s.view()) as { status: { progress?: { accounts_done?: number; accounts_total?: number } } }).status.progress;
      return progress?.accounts_total === 2 && progress.accounts_done === 2 ? true : undefined;
    },
    60_000,
  );
});
test.after(async () => {
  await s.svc.stop();
  await s.fake.close();
});

const emailOf = async (id: string) => (await query<{ email: string }>(s.reader, 'SELECT email FROM public.customer WHERE id = $1', [id]))[0]?.email;
const wait = (timeoutMs: number) => request(s.svc.api, 'GET', `/api/wait/${s.syncId}?timeout=${timeoutMs}`, { token: s.account.token });

test("an account whose feed fails holds up neither the platform's feed nor the other accounts', and no wait says ok over it", async () => {
  s.fake.faults.add({ match: { method: 'GET', path: '/v1/events', acting: accounts.a }, kind: 'status', status: 500, times: Infinity });
  try {
    const pending = wait(8000);
    // The wait has reached the sync (its pass is wanted) before the changes are made.
    await new Promise((r) => setTimeout(r, 1000));
    const platform = await politely(() => s.stripe.customers.create({ email: 'platform@example.com' }));
    const other = await politely(() => s.stripe.customers.create({ email: 'other@b.example.com' }, { stripeAccount: accounts.b }));
    const missed = await politely(() => s.stripe.customers.create({ email: 'missed@a.example.com' }, { stripeAccount: accounts.a }));
    // Both within a few of the feeds' reads, while the wait still waits on the failing account.
    await waitFor('the platform customer', async () => ((await emailOf(platform.id)) ? true : undefined), 5000);
    await waitFor("the other account's customer", async () => ((await emailOf(other.id)) ? true : undefined), 5000);
    const answer = await pending;
    assert.is(answer.status, 200, answer.text);
    assert.is(answer.body.ok, false, 'no ok over a connected account whose feed could not be read');
    assert.is(answer.body.reason, 'timeout');
    assert.is(await emailOf(missed.id), undefined, "the failing account's change is not there: the wait was right to say so");
  } finally {
    s.fake.faults.clear();
  }
  // The feed answers again: the next wait covers it.
  const again = await wait(40_000);
  assert.is(again.body.ok, true, again.text);
  assert.is((await query(s.reader, "SELECT 1 FROM public.customer WHERE email = 'missed@a.example.com'")).length, 1);
});

test.run();
