/**
 * The continuous audit (docs/stripe.md#the-audit). Changes that make no event, as Stripe has
 * them (the fake's silent edits and deletions) and a row removed from the database by hand,
 * are each found and fixed within one round, as ordinary events, and counted as drift by
 * table in the status; a round over an unchanged account finds nothing; the audit keeps to
 * its share and draws no 429.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { RestTail } from '../sim/check/rest-events.ts';
import { tunablesFromEnv } from '../src/main.ts';
import { AUDIT_EVERY_MS } from '../src/stripe/audit.ts';
import { query } from './harness/postgres.ts';
import { request } from './harness/service.ts';
import { waitFor } from './harness/process.ts';
import { backfilledStripeSync, directSyncDatabase, type StripeSyncSetUp } from './harness/stripe-sync.ts';

let s: StripeSyncSetUp;
let tail: RestTail;
const SHARE = 10;

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_AUDITAUDITAUDITAUDIT00000',
    seed: 83,
    customers: 12,
    pollIntervalMs: 250,
    config: { roles: ['api', 'sync', 'decoder', 'events'] },
    tunables: { stripe: { pollIntervalMs: 250, audit: { settleMs: 1500, everyMs: 1000, sharePerSecond: SHARE } } },
  });
  tail = new RestTail(
    { restUrl: `http://127.0.0.1:${s.svc.service.eventsPort}`, username: s.account.eventsUsername, password: s.account.eventsPassword },
    `svc.${s.syncId}.`,
  );
});

test.after(async () => {
  await s?.svc.stop();
  await s?.fake.close();
});

/** The end of the next round that starts after now. */
async function nextRound(): Promise<{ drift: any; seconds: number }> {
  const from = Date.now();
  const drift = await waitFor(
    'an audit round begun and completed after now',
    async () => {
      const d = (await s.view()).drift;
      const a = d.audit;
      return a?.last_started_at && Date.parse(a.last_started_at) >= from ? d : undefined;
    },
    240_000,
    250,
  );
  return { drift, seconds: (Date.now() - from) / 1000 };
}

const drifted = (drift: any, table: string) => drift.tables.find((t: any) => t.table === table) ?? { missing: 0, differing: 0, extra: 0 };

test('a round finds nothing where every change had its event, even edits made while it reads', async () => {
  // Evented edits all through the round: the feed brings each, the audit must count none.
  let editing = true;
  const customers = s.upstream.all('customers').map((c) => c.id as string);
  const edits = (async () => {
    for (let n = 0; editing; n++) {
      s.upstream.update('customers', customers[n % customers.length]!, { name: `Evented ${n}` });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const { drift } = await nextRound();
  editing = false;
  await edits;
  assert.equal(drift.last_24h, { missing: 0, differing: 0, extra: 0 }, JSON.stringify(drift.tables.filter((t: any) => t.missing + t.differing + t.extra > 0)));
  assert.is(drift.audit.share_per_second, SHARE);
  assert.ok(drift.audit.last_round_seconds > 0);
  const compared = new Set(drift.tables.filter((t: any) => t.compared_at).map((t: any) => t.table));
  for (const table of ['customer', 'product', 'price', 'invoice', 'subscription', 'charge', 'balance_transaction']) assert.ok(compared.has(table), table);
  assert.is(s.fake.stats.rateLimited, 0, 'no 429');
});

test('silent edits, silent deletions and a row removed by hand are each fixed within one round, as events', async () => {
  await tail.next();
  // The edited customer has an upcoming invoice, which shows its name: the fix must reach it too.
  const previewed = new Set((await query<{ customer: string }>(s.reader, 'SELECT customer FROM upcoming_customer_invoice')).map((r) => r.customer));
  const customers = s.upstream.all('customers');
  const edited = customers.find((c) => previewed.has(c.id as string));
  const removedByHand = customers.find((c) => c !== edited);
  assert.ok(edited, 'a customer with an upcoming invoice');
  const gone = s.upstream.all('products').at(-1)!;
  // The previews the evented edits marked are all refreshed first: none is due when the silent edit lands.
  const owner = await directSyncDatabase(s.svc.controlUrl, s.syncId);
  await waitFor(
    'the upcoming invoices refreshed',
    async () => ((await query(owner, 'SELECT 1 FROM public_swap._stripe_upcoming_due')).length === 0 ? true : undefined),
    60_000,
  );
  s.upstream.silentEdit('customers', edited!.id as string, { name: 'Edited with no event' });
  s.upstream.silentDelete('products', gone.id as string);
  await query(owner, 'DELETE FROM public.customer WHERE id = $1', [removedByHand!.id]);
  const changedAt = Date.now();

  const fixed = await waitFor(
    'every difference fixed',
    async () => {
      const [name] = await query<{ name: string }>(s.reader, 'SELECT name FROM customer WHERE id = $1', [edited!.id]);
      const back = await query(s.reader, 'SELECT 1 FROM customer WHERE id = $1', [removedByHand!.id]);
      const product = await query(s.reader, 'SELECT 1 FROM product WHERE id = $1', [gone.id]);
      return name?.name === 'Edited with no event' && back.length === 1 && product.length === 0 ? Date.now() : undefined;
    },
    240_000,
    200,
  );
  // One round after the changes, the status has counted them.
  const { drift } = await nextRound();
  const round = drift.audit.last_round_seconds;
  console.log(`  fixed ${((fixed - changedAt) / 1000).toFixed(1)} s after the changes; a round takes ${round.toFixed(1)} s at ${SHARE} requests/s`);
  assert.ok((fixed - changedAt) / 1000 <= 2 * round + 5, 'within the round under way and the next');
  assert.is(drifted(drift, 'customer').differing, 1);
  assert.is(drifted(drift, 'customer').missing, 1);
  assert.is(drifted(drift, 'product').extra, 1);
  assert.equal(drift.last_24h, { missing: 1, differing: 1, extra: 1 });

  await waitFor(
    "the upcoming invoice showing the customer's new name",
    async () =>
      (await query<{ customer_name: string }>(s.reader, 'SELECT customer_name FROM upcoming_customer_invoice WHERE customer = $1', [edited!.id]))[0]
        ?.customer_name === 'Edited with no event'
        ? true
        : undefined,
    60_000,
  );
  // Ordinary events: the edit an update, the row back an insert, the product a delete.
  const events = (await tail.next()).map((e) => JSON.parse(e.value));
  const of = (id: unknown) => events.filter((e) => e.id === id).map((e) => e.event);
  assert.ok(of(edited!.id).includes('updated'), JSON.stringify(of(edited!.id)));
  assert.ok(of(removedByHand!.id).includes('inserted'));
  assert.ok(of(gone.id).includes('deleted'));
  assert.is(s.fake.stats.rateLimited, 0, 'no 429');
});

test('a customer on a test clock, which only its clock’s list shows, is compared too', async () => {
  // Found by the simulation (seed 8499): the customers list leaves out test-clock customers, so
  // the audit never saw one that was renamed with no event.
  const clock = await s.stripe.testHelpers.testClocks.create({ frozen_time: Math.floor(Date.now() / 1000) });
  const clocked = await s.stripe.customers.create({ name: 'On a clock', test_clock: clock.id });
  const listed = await s.stripe.customers.list({ limit: 100 });
  assert.not.ok(
    listed.data.some((c) => c.id === clocked.id),
    'the top-level list leaves it out',
  );
  await waitFor(
    'the clocked customer synced',
    async () => ((await query(s.reader, 'SELECT 1 FROM customer WHERE id = $1', [clocked.id])).length ? true : undefined),
    60_000,
  );
  s.upstream.silentEdit('customers', clocked.id, { name: 'Clocked, edited with no event' });
  await waitFor(
    'the clocked customer fixed',
    async () =>
      (await query<{ name: string }>(s.reader, 'SELECT name FROM customer WHERE id = $1', [clocked.id]))[0]?.name === 'Clocked, edited with no event'
        ? true
        : undefined,
    240_000,
    200,
  );
  assert.is(s.fake.stats.rateLimited, 0, 'no 429');
});

test('the drift is in the metrics', async () => {
  const metrics = await request(s.svc.api, 'GET', '/metrics', { token: s.svc.adminToken });
  assert.is(metrics.status, 200);
  const text = metrics.text;
  assert.match(text, new RegExp(`tributary_sync_drift_rows\\{sync_id="${s.syncId}",table="product",drift="extra"\\} 1\\n`));
  assert.match(text, new RegExp(`tributary_sync_table_compared_timestamp_seconds\\{sync_id="${s.syncId}",table="customer"\\} \\d+`));
  assert.match(text, new RegExp(`tributary_sync_audit_round_seconds\\{sync_id="${s.syncId}"\\} [\\d.]+`));
});

test('the operator sets how often a round starts, 0 to turn the audit off; bad values stop the start', () => {
  assert.is(AUDIT_EVERY_MS, 10 * 60_000);
  assert.equal(tunablesFromEnv({ TRIBUTARY_STRIPE_AUDIT_EVERY_S: '3600' }), { stripe: { audit: { everyMs: 3_600_000 } } });
  assert.equal(tunablesFromEnv({ TRIBUTARY_STRIPE_AUDIT_EVERY_S: '0' }), { stripe: { audit: { everyMs: 0 } } });
  for (const bad of ['-1', '1.5', 'hourly', '86401']) {
    assert.throws(
      () => tunablesFromEnv({ TRIBUTARY_STRIPE_AUDIT_EVERY_S: bad }),
      /TRIBUTARY_STRIPE_AUDIT_EVERY_S: expected a whole number of seconds from 0 \(off\) to 86400/,
      bad,
    );
  }
});

test.run();
