/**
 * Regressions found by trying the Stripe sync as a user would: several events about one
 * object in one read of the feed (two quick updates of a customer, an invoice created,
 * finalized and paid at once) must not stop the sync, and the console must list the tables
 * of a Stripe sync (over a hundred of them).
 */
import type Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeStripe } from '../fakes/stripe/index.ts';
import { stripeTables } from '../src/stripe/tables.ts';
import { query } from './harness/postgres.ts';
import { pacedWrites } from './harness/paced.ts';
import { backfilledStripeSync } from './harness/stripe-sync.ts';
import { loudSetUp, request, type TestAccount, type TestService, waitOk as waitOkOf } from './harness/service.ts';

const KEY = 'sk_test_BURSTBURSTBURST0123456789';
/** Long enough that a burst made right after a read always falls into one read of the feed. */
const POLL_MS = 3000;
let fake: FakeStripe;
let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let reader: string;
let stripe: Stripe;

const paced = pacedWrites();

let syncView: () => Promise<any>;

const waitOk = () => waitOkOf(svc!, account.token, syncId);

test.before(
  loudSetUp(
    async () => {
      ({
        fake,
        svc,
        account,
        syncId,
        reader,
        stripe,
        view: syncView,
      } = await backfilledStripeSync({ key: KEY, seed: 7, customers: 5, pollIntervalMs: POLL_MS }));
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test("the key check's account request counts in the account's quota, where the sync starting next sees it", async () => {
  // It went under the key's digest (the account was not known yet), so the sync's first
  // second could take its whole share on top of it and Stripe answered 429.
  const key = 'sk_test_CHECKCOUNTED0123456789';
  const other = fake.createAccount();
  fake.addKey(key, { account: other.id });
  const created = await request(svc!.api, 'POST', '/api/syncs', { token: account.token, body: { kind: 'stripe', api_key: key } });
  assert.is(created.status, 201, created.text);
  const asked = fake.stats.byAccount(other.id).requests;
  const [logged] = await query<{ n: number }>(svc!.controlUrl, 'SELECT count(*)::int AS n FROM quota_requests WHERE key = $1 AND at < now()', [
    `stripe:${other.id}`,
  ]);
  // Every request of the check so far is in the account's log (the sync may have added more).
  assert.ok(logged!.n >= asked, `${logged!.n} logged of the ${asked} the check sent`);
  await request(svc!.api, 'DELETE', `/api/syncs/${created.body.id}`, { token: account.token });
});

test('two updates of one customer in one read of the feed: both land and the sync goes on', async () => {
  const customer = await paced(() => stripe.customers.create({ email: 'burst@example.com', name: 'Burst' }));
  await waitOk();
  // Right after a read: both updates are in the next one.
  await paced(() => stripe.customers.update(customer.id, { name: 'Burst 1' }));
  await paced(() => stripe.customers.update(customer.id, { name: 'Burst 2' }));
  await waitOk();
  const [row] = await query<{ name: string }>(reader, 'SELECT name FROM public.customer WHERE id = $1', [customer.id]);
  assert.is(row?.name, 'Burst 2');
  // Later changes still arrive: the sync did not stop on the burst.
  await paced(() => stripe.customers.update(customer.id, { name: 'After the burst' }));
  await waitOk();
  const [after] = await query<{ name: string }>(reader, 'SELECT name FROM public.customer WHERE id = $1', [customer.id]);
  assert.is(after?.name, 'After the burst');
  const view = await syncView();
  assert.is(view.status.indicator, 'normal', view.status.last_error ?? '');
  assert.is(view.status.last_error, null);
});

test('an invoice created, finalized and paid within one read lands paid', async () => {
  const [sub] = await query<{ customer: string }>(reader, "SELECT customer FROM public.subscription WHERE status = 'active' ORDER BY id LIMIT 1");
  assert.ok(sub, 'the generated account has an active subscription');
  await waitOk();
  // Four writes inside one read of the feed.
  await paced(() => stripe.invoiceItems.create({ customer: sub.customer, amount: 1234, currency: 'usd' }));
  const draft = await paced(() => stripe.invoices.create({ customer: sub.customer, pending_invoice_items_behavior: 'include' }));
  await paced(() => stripe.invoices.finalizeInvoice(draft.id!));
  await paced(() => stripe.invoices.pay(draft.id!, { paid_out_of_band: true }));
  await waitOk();
  const [row] = await query<{ status: string }>(reader, 'SELECT status FROM public.invoice WHERE id = $1', [draft.id]);
  assert.is(row?.status, 'paid');
  assert.is((await syncView()).status.last_error, null);
});

test('the console lists every table of a Stripe sync with its row count', async () => {
  const answer = await request(svc!.api, 'GET', `/api/syncs/${syncId}/tables`, { token: account.token });
  assert.is(answer.status, 200, answer.text);
  const tables: Array<{ name: string; rows: number; topic: string | null }> = answer.body.data;
  assert.ok(tables.length > 100, `${tables.length} tables`);
  for (const name of stripeTables().keys())
    assert.ok(
      tables.some((t) => t.name === name),
      `${name} is listed`,
    );
  const customers = tables.find((t) => t.name === 'customer')!;
  const [count] = await query<{ n: number }>(reader, 'SELECT count(*)::int AS n FROM public.customer');
  assert.is(customers.rows, count!.n);
  assert.is(customers.topic, `svc.${syncId}.customer`);
});

test.run();
