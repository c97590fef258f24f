/**
 * The `event` table: every event the Stripe sync reads, typed like the other tables. The
 * backfill lists the 30 days Stripe keeps, the feed adds each new event once, and a new
 * backfill (the feed out of reach) removes none of them: the table keeps what Stripe forgot.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';
import { waitFor } from './harness/process.ts';
import { query } from './harness/postgres.ts';

let s: StripeSyncSetUp;

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_EVENTSTABLEEVENTSTABLE01',
    seed: 41,
    customers: 15,
    pollIntervalMs: 300,
    // Events from before the sync: only the backfill's listing can bring them.
    before: async (stripe) => {
      for (let i = 0; i < 3; i++) await stripe.customers.create({ email: `before${i}@example.com` });
    },
  });
});
test.after(async () => {
  await s.svc.stop();
  await s.fake.close();
});

const eventIds = async () => (await query<{ id: string }>(s.reader, 'SELECT id FROM public.event ORDER BY id')).map((r) => r.id);

test('the backfill brings every event Stripe lists, typed', async () => {
  const upstream = s.upstream.events();
  assert.ok(upstream.length >= 3, 'the account has events from before the sync');
  await waitFor('every listed event', async () => ((await eventIds()).length === upstream.length ? true : undefined), 20_000);
  assert.equal(await eventIds(), upstream.map((e) => e.id).sort());
  const columns = await query<{ column_name: string; data_type: string }>(
    s.reader,
    "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'event' ORDER BY column_name",
  );
  const types = Object.fromEntries(columns.map((c) => [c.column_name, c.data_type]));
  assert.is(types.created, 'timestamp with time zone');
  assert.is(types.data, 'jsonb');
  assert.is(types.type, 'text');
  assert.is(types.pending_webhooks, 'bigint');
  const sample = upstream[0]!;
  const [row] = await query<any>(
    s.reader,
    "SELECT type, extract(epoch FROM created)::bigint AS created, data->'object'->>'id' AS object_id FROM public.event WHERE id = $1",
    [sample.id],
  );
  assert.equal(row, { type: sample.type, created: String(sample.created), object_id: sample.data.object.id });
});

test('a new event arrives once, from the feed', async () => {
  const customer = await s.stripe.customers.create({ email: 'audit@example.com' });
  const [row] = await waitFor(
    'the customer.created event',
    async () => {
      const rows = await query<any>(s.reader, "SELECT id, type FROM public.event WHERE data->'object'->>'id' = $1", [customer.id]);
      return rows.length > 0 ? rows : undefined;
    },
    10_000,
  );
  assert.is(row.type, 'customer.created');
  // Read again by later polls and pages: still one row per event.
  await s.stripe.customers.update(customer.id, { name: 'Audited' });
  await waitFor('the update event', async () => ((await eventIds()).length === s.upstream.events().length ? true : undefined), 10_000);
  const [dupes] = await query<{ n: string }>(s.reader, 'SELECT count(*) - count(DISTINCT id) AS n FROM public.event');
  assert.is(Number(dupes!.n), 0);
});

test('a new backfill after the feed fell out of reach keeps the events Stripe has forgotten', async () => {
  const before = await eventIds();
  const view = await s.view();
  // The feed goes dark for 31 days: Stripe forgets every event so far, and the cursor is too old.
  s.fake.faults.add({ match: { path: '/v1/events', account: s.upstream.id }, kind: 'status', status: 500, times: Infinity });
  await new Promise((r) => setTimeout(r, 800));
  s.fake.clock.advance(31 * 86_400_000);
  assert.is(s.upstream.events().length, 0, 'Stripe lists none of them now');
  s.fake.faults.clear();
  await waitFor(
    'the new backfill',
    async () => (Date.parse((await s.view()).status.completed_at) > Date.parse(view.status.completed_at) ? true : undefined),
    60_000,
  );
  assert.match(s.svc.logs.text, /events feed out of reach; backfilling again/);
  const after = await eventIds();
  for (const id of before) assert.ok(after.includes(id), `event ${id} kept`);
  // And the table goes on recording.
  const customer = await s.stripe.customers.create({ email: 'later@example.com' });
  await waitFor(
    'an event after the new backfill',
    async () => ((await query(s.reader, "SELECT 1 FROM public.event WHERE data->'object'->>'id' = $1", [customer.id])).length > 0 ? true : undefined),
    10_000,
  );
});

test.run();
