/**
 * The payment-method rule of docs/stripe.md ("What is replicated?"): a payment method created
 * and then neither attached to a customer nor used by a payment is not synced (Stripe sends no
 * event for it and lists payment methods per customer only). Once attached it is synced, and
 * stays after a detach; one a payment used without attaching it is synced too, through the
 * payment that names it. The simulation's upstream check relies on this as its one exemption.
 */
import type Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FakeStripe, FakeStripeAccount } from '../fakes/stripe/index.ts';
import { pacedWrites } from './harness/paced.ts';
import { query } from './harness/postgres.ts';
import { loudSetUp, type TestAccount, type TestService, waitOk as waitOkOf } from './harness/service.ts';
import { backfilledStripeSync } from './harness/stripe-sync.ts';

const KEY = 'sk_test_PAYMENTMETHODSRULE0123456';
let fake: FakeStripe;
let upstream: FakeStripeAccount;
let svc: TestService | undefined;
let account: TestAccount;
let syncId: string;
let reader: string;
let stripe: Stripe;
let view: () => Promise<any>;

const paced = pacedWrites();
const waitOk = () => waitOkOf(svc!, account.token, syncId);
const row = async (id: string) =>
  (await query<{ id: string; customer: string | null }>(reader, 'SELECT id, customer FROM public.payment_method WHERE id = $1', [id]))[0];
const rowCount = async (table: string, id: string) => (await query(reader, `SELECT 1 FROM public.${table} WHERE id = $1`, [id])).length;

test.before(
  loudSetUp(
    async () => {
      ({ fake, upstream, svc, account, syncId, reader, stripe, view } = await backfilledStripeSync({
        key: KEY,
        seed: 7,
        customers: 2,
        pollIntervalMs: 250,
      }));
    },
    () => svc,
  ),
);

test.after(async () => {
  await svc?.stop();
  await fake?.close();
});

test('a payment method never attached nor used is not synced; once attached it is, and stays after a detach', async () => {
  const lonely = await paced(() => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_visa' } }));
  assert.ok(!upstream.events().some((e) => e.data.object.id === lonely.id), 'Stripe sends no event for a payment method that is only created');
  // An evented change after it: once the sync has it, the sync has read past the creation.
  const customer = await paced(() => stripe.customers.create({ name: 'Holder' }));
  await waitOk();
  assert.is(await rowCount('customer', customer.id), 1, 'the sync caught up with the customer created after the payment method');
  assert.is(await row(lonely.id), undefined, `${lonely.id}, never attached nor used, has no row`);

  await paced(() => stripe.paymentMethods.attach(lonely.id, { customer: customer.id }));
  assert.ok(
    upstream.events().some((e) => e.type === 'payment_method.attached' && e.data.object.id === lonely.id),
    'attaching sends payment_method.attached',
  );
  await waitOk();
  assert.equal(await row(lonely.id), { id: lonely.id, customer: customer.id }, 'the attached payment method has its row, naming its customer');

  await paced(() => stripe.paymentMethods.detach(lonely.id));
  await waitOk();
  assert.equal(await row(lonely.id), { id: lonely.id, customer: null }, 'once attached, the row stays after a detach, customer cleared');
});

test('a payment method a payment used without attaching it is synced', async () => {
  const card = await paced(() => stripe.paymentMethods.create({ type: 'card', card: { token: 'tok_mastercard' } }));
  const paid = await paced(() => stripe.paymentIntents.create({ amount: 1900, currency: 'usd', payment_method: card.id, confirm: true }));
  assert.is(paid.status, 'succeeded');
  assert.is(upstream.get('payment_methods', card.id)?.customer, null, 'the payment did not attach the card');
  assert.ok(!upstream.events().some((e) => e.type.startsWith('payment_method.') && e.data.object.id === card.id), 'no payment_method.* event names the card');
  await waitOk();
  assert.equal(await row(card.id), { id: card.id, customer: null }, 'the card the payment used has its row, with no customer');
  assert.is(await rowCount('payment_intent', paid.id), 1, 'the payment intent that names it is there too');
  assert.is((await view()).status.last_error, null, 'the sync reports no error');
});

test.run();
