/**
 * Objects Stripe sends no events for, made by evented changes after the backfill, reach the
 * database from the events feed alone: the balance transactions of a payment, a refund, a
 * dispute and a payout; the payment methods payments used without attaching them (one that
 * paid, one that declined); an invoice's lines past the tenth (the event carries ten); a
 * checkout session's line items (its events carry none). Each is fetched once, not at every
 * event that names it.
 *
 * A payment method created and never attached nor used is not here: no event, no list
 * (GET /v1/payment_methods lists Treasury ones) and no object names it, so no sync can know it.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeStripe, FakeStripeAccount } from '../fakes/stripe/index.ts';
import { stripeMatchesUpstream } from '../sim/check/stripe-upstream.ts';
import { query } from './harness/postgres.ts';
import { pacedWrites } from './harness/paced.ts';
import { backfilledStripeSync } from './harness/stripe-sync.ts';
import { loudSetUp, type TestAccount, type TestService, waitOk as waitOkOf } from './harness/service.ts';

const KEY = 'sk_test_UNEVENTEDUNEVENTED0123456';
let fake: FakeStripe;
let upstream: FakeStripeAccount;
let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let reader: string;
let stripe: Stripe;

const paced = pacedWrites();

let syncView: () => Promise<any>;

const waitOk = () => waitOkOf(svc!, account.token, syncId);

const ids = async (sql: string, params: unknown[] = []) => (await query<{ id: string }>(reader, sql, params)).map((r) => r.id).sort();

test.before(
  loudSetUp(
    async () => {
      ({
        fake,
        upstream,
        svc,
        account,
        syncId,
        reader,
        stripe,
        view: syncView,
      } = await backfilledStripeSync({ key: KEY, seed: 5, customers: 4, pollIntervalMs: 500 }));
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test('balance transactions, payment methods used unattached and child lists events leave out reach the database', async () => {
  // A payment with a card never attached to a customer (no payment_method.* event), partly refunded.
  const card = await paced(() => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_visa' } }));
  const paid = await paced(() => stripe.paymentIntents.create({ amount: 2500, currency: 'usd', payment_method: card.id, confirm: true }));
  const refund = await paced(() => stripe.refunds.create({ payment_intent: paid.id, amount: 1000 }));
  // A card that declines: the failed payment names it (and carries it whole).
  const declining = await paced(() => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_chargeDeclined' } }));
  await paced(() => stripe.paymentIntents.create({ amount: 1800, currency: 'usd', payment_method: declining.id, confirm: true })).then(
    () => assert.unreachable('the card declines'),
    (error: unknown) => assert.ok(error instanceof Stripe.errors.StripeCardError, String(error)),
  );
  // A payment the cardholder disputes: the dispute carries its balance transaction whole.
  const disputing = await paced(() => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_createDispute' } }));
  const disputed = await paced(() => stripe.paymentIntents.create({ amount: 4200, currency: 'usd', payment_method: disputing.id, confirm: true }));
  // Once the payments settle (two days), a payout, then canceled: two balance transactions.
  fake.clock.advance(3 * 86_400_000);
  const payout = await paced(() => stripe.payouts.create({ amount: 500, currency: 'usd' }));
  await paced(() => stripe.payouts.cancel(payout.id));
  // A customer's paid invoice of twelve lines: its events carry the first ten.
  const customer = await paced(() =>
    stripe.customers.create({ name: 'Many Lines', payment_method: 'pm_card_visa', invoice_settings: { default_payment_method: 'pm_card_visa' } }),
  );
  for (let i = 1; i <= 12; i++)
    await paced(() => stripe.invoiceItems.create({ customer: customer.id, amount: 100 * i, currency: 'usd', description: `Line ${i}` }));
  const draft = await paced(() => stripe.invoices.create({ customer: customer.id, pending_invoice_items_behavior: 'include', auto_advance: false }));
  await paced(() => stripe.invoices.finalizeInvoice(draft.id!));
  const invoice = await paced(() => stripe.invoices.pay(draft.id!));
  // A checkout session (created without an event) that a buyer completes.
  const price = await paced(() => stripe.prices.create({ currency: 'usd', unit_amount: 1500, product_data: { name: 'Workshop seat' } }));
  const session = await paced(() =>
    stripe.checkout.sessions.create({ mode: 'payment', line_items: [{ price: price.id, quantity: 2 }], success_url: 'https://example.com/done' }),
  );
  upstream.act('checkout/sessions', session.id, 'complete');
  await waitOk();

  const violations = (await stripeMatchesUpstream({ account: upstream, databaseUrl: reader })).filter((v) =>
    /^(table )?(balance_transaction|payment_method|line_item)\b/.test(v.detail),
  );
  assert.equal(
    violations.map((v) => v.detail),
    [],
  );
  // The objects of this test in particular (the comparison above covers the backfilled ones too).
  const charge = upstream.get('charges', paid.latest_charge as string)!;
  const dispute = upstream.all('disputes').find((d) => d.payment_intent === disputed.id)!;
  const expectedTxns = [
    charge.balance_transaction,
    refund.balance_transaction,
    (dispute.balance_transactions as Array<{ id: string }>)[0]!.id,
    payout.balance_transaction,
    upstream.get('payouts', payout.id)!.failure_balance_transaction,
    upstream.all('charges').find((c) => c.customer === customer.id)!.balance_transaction,
  ] as string[];
  assert.equal(await ids('SELECT id FROM public.balance_transaction WHERE id = ANY($1)', [expectedTxns]), [...expectedTxns].sort());
  const methods = [card.id, declining.id, disputing.id];
  assert.equal(await ids('SELECT id FROM public.payment_method WHERE id = ANY($1) AND customer IS NULL', [methods]), [...methods].sort());
  const lines = await stripe.invoices.listLineItems(invoice.id!, { limit: 100 });
  assert.is(lines.data.length, 12);
  assert.equal(await ids('SELECT id FROM public.line_item WHERE invoice = $1', [invoice.id]), lines.data.map((l) => l.id).sort());
  const items = await stripe.checkout.sessions.listLineItems(session.id);
  assert.is(items.data.length, 1);
  assert.equal(await ids('SELECT id FROM public.item WHERE _parent_id = $1', [session.id]), items.data.map((l) => l.id).sort());
  assert.is((await syncView()).status.last_error, null);
});

test('a balance transaction that matures keeps the status last read: Stripe sends no event for it', async () => {
  const card = await paced(() => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_visa' } }));
  const paid = await paced(() => stripe.paymentIntents.create({ amount: 1300, currency: 'usd', payment_method: card.id, confirm: true }));
  await waitOk();
  const txn = upstream.get('charges', paid.latest_charge as string)!.balance_transaction as string;
  const status = async () => (await query<{ status: string }>(reader, 'SELECT status FROM public.balance_transaction WHERE id = $1', [txn]))[0]?.status;
  assert.is(await status(), 'pending');
  fake.clock.advance(3 * 86_400_000);
  assert.is(upstream.shown('balance_transactions').find((t) => t.id === txn)?.status, 'available');
  // A later change the sync reads: still nothing says the transaction matured.
  await paced(() => stripe.customers.create({ name: 'After maturity' }));
  await waitOk();
  assert.is(await status(), 'pending', 'the row keeps the status the sync last read');
  const violations = (await stripeMatchesUpstream({ account: upstream, databaseUrl: reader })).filter((v) => v.detail.includes(txn));
  assert.equal(
    violations.map((v) => v.detail),
    [],
    'the checker holds it to the documented rule',
  );
});

test('what is stored already is not fetched again when a later event names it', async () => {
  const fetched = () => fake.stats.byPath('/v1/balance_transactions/').requests + fake.stats.byPath('/v1/payment_methods/').requests;
  const [charge] = await query<{ id: string; balance_transaction: string; payment_method: string }>(
    reader,
    'SELECT id, balance_transaction, payment_method FROM public.charge WHERE balance_transaction IS NOT NULL AND payment_method IS NOT NULL ORDER BY created DESC LIMIT 1',
  );
  assert.ok(charge);
  const before = fetched();
  // charge.updated names the same balance transaction and payment method, both stored.
  await paced(() => stripe.charges.update(charge.id, { metadata: { order: '1234' } }));
  await waitOk();
  const [row] = await query<{ metadata: Record<string, string> }>(reader, 'SELECT metadata FROM public.charge WHERE id = $1', [charge.id]);
  assert.is(row?.metadata.order, '1234');
  assert.is(fetched() - before, 0, 'nothing fetched by id');
});

test.run();
