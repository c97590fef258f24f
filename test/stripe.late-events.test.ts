/**
 * Stripe's events list is eventually consistent (UPSTREAMS.md): the fake lists a share of the
 * events only after a delay, in their place by `created`, behind newer events already listed.
 * A feed that reads only what comes after its cursor never sees them. Every late event must
 * reach the database (with the row at its newest version, not the late event's older one), the
 * `event` table and the stream, and a wait after the late events were listed covers them.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type Stripe from 'stripe';
import { RestTail } from '../sim/check/rest-events.ts';
import { foldEvents } from '../sim/check/events.ts';
import { query } from './harness/postgres.ts';
import { waitFor } from './harness/process.ts';
import { waitOk } from './harness/service.ts';
import { tunablesFromEnv } from '../src/main.ts';
import { LATE_WINDOW_S } from '../src/stripe/late-events.ts';
import { backfilledStripeSync, type StripeSyncSetUp } from './harness/stripe-sync.ts';

const CUSTOMERS = 8;
let s: StripeSyncSetUp;
let customers: string[];

test.before(async () => {
  s = await backfilledStripeSync({
    key: 'sk_test_LATEEVENTSLATEEVENTS0000',
    seed: 47,
    customers: CUSTOMERS,
    pollIntervalMs: 200,
    config: { roles: ['api', 'sync', 'decoder', 'events'] },
    tunables: { stripe: { pollIntervalMs: 200, lateEvents: { everyMs: 1000 } } },
  });
  customers = s.upstream
    .all('customers')
    .map((c) => c.id)
    .slice(0, CUSTOMERS);
});

test.after(async () => {
  await s?.svc.stop();
  await s?.fake.close();
});

const ids = (list: Stripe.ApiList<Stripe.Event>) => list.data.map((e) => e.id);

test('the fake lists a late event behind a newer one, and only once its delay has passed', async () => {
  // Hidden for 3 s exactly. With only a longest delay (2 s), the one drawn, by the fake's
  // count of events made so far, was sometimes a few milliseconds, and a fresh-clone
  // .ci/run found the event listed already.
  assert.throws(() => s.fake.lateEvents.set({ share: 1, minDelayMs: 3001, delayMs: 3000 }), /minDelayMs from 0 to delayMs/);
  s.fake.lateEvents.set({ share: 1, minDelayMs: 3000, delayMs: 3000, seed: 3 });
  // Made through the fake's control API, which Stripe's rate limit does not count.
  s.upstream.update('customers', customers[0]!, { name: 'Listed late' });
  s.fake.lateEvents.set(undefined);
  s.upstream.update('customers', customers[1]!, { name: 'Listed at once' });
  const late = s.fake.lateEvents.log.at(-1)!;
  const before = await s.stripe.events.list({ limit: 10 });
  assert.not.ok(ids(before).includes(late.id), 'not listed yet');
  const newer = before.data[0]!;
  assert.is((newer.data.object as Stripe.Customer).name, 'Listed at once');
  const hidden = await s.stripe.events.retrieve(late.id).then(
    () => 'found',
    (error: Error) => error.message,
  );
  assert.match(hidden, /No such event/);

  await new Promise((r) => setTimeout(r, late.visibleAtMs - Date.now() + 1));
  const after = ids(await s.stripe.events.list({ limit: 10 }));
  assert.ok(after.indexOf(late.id) > after.indexOf(newer.id), 'listed behind the newer event');
  // What a reader that keeps to its cursor asks: never the late event.
  assert.not.ok(ids(await s.stripe.events.list({ ending_before: newer.id, limit: 100 })).includes(late.id));
  assert.is((await s.stripe.events.retrieve(late.id)).id, late.id);
});

test('every late event reaches the database at its newest version, the event table and the stream', async () => {
  const lateBefore = s.fake.lateEvents.log.length;
  s.fake.lateEvents.set({ share: 0.4, delayMs: 4000, seed: 11 });
  // Quick edits, several of each customer: a late event is often older than one applied.
  for (let n = 0; n < 40; n++) {
    s.upstream.update('customers', customers[n % CUSTOMERS]!, { name: `Edit ${n}`, metadata: { n: String(n) } });
    await new Promise((r) => setTimeout(r, 50));
  }
  s.fake.lateEvents.set(undefined);
  const late = s.fake.lateEvents.log.slice(lateBefore);
  assert.ok(late.length >= 8, `${late.length} late events of 40`);
  await waitFor('every late event listed', async () => (s.fake.lateEvents.pending === 0 ? true : undefined), 10_000);
  // Listed by now: a wait covers them.
  await waitOk(s.svc, s.account.token, s.syncId);

  const upstreamNames = new Map(customers.map((id) => [id, s.upstream.get('customers', id)!.name as string]));
  const rows = await query<{ id: string; name: string }>(s.reader, 'SELECT id, name FROM public.customer WHERE id = ANY($1)', [customers]);
  assert.equal(new Map(rows.map((r) => [r.id, r.name])), upstreamNames, 'the database equals upstream');
  const logged = await query<{ id: string }>(s.reader, 'SELECT id FROM public.event WHERE id = ANY($1)', [late.map((l) => l.id)]);
  assert.is(logged.length, late.length, 'every late event in the event table');

  const tail = new RestTail(
    { restUrl: `http://127.0.0.1:${s.svc.service.eventsPort}`, username: s.account.eventsUsername, password: s.account.eventsPassword },
    `svc.${s.syncId}.`,
  );
  const fold = foldEvents('rest', await tail.next(), { midStream: true });
  assert.equal(fold.violations, []);
  const streamed = fold.rows.get('customer')!;
  for (const [id, name] of upstreamNames) assert.is(streamed.get(id)?.name, name, `the stream's last word on ${id}`);
  const view = (await s.view()).status;
  assert.is(view.last_error, null);
});

test("the operator sets the window's reach, 0 to turn it off; bad values stop the start", () => {
  assert.is(LATE_WINDOW_S, 60);
  assert.equal(tunablesFromEnv({ TRIBUTARY_STRIPE_LATE_WINDOW_S: '300' }), { stripe: { lateEvents: { windowS: 300 } } });
  assert.equal(tunablesFromEnv({ TRIBUTARY_STRIPE_LATE_WINDOW_S: '0' }), { stripe: { lateEvents: { windowS: 0 } } });
  for (const bad of ['-1', '1.5', 'a minute', '3601']) {
    assert.throws(
      () => tunablesFromEnv({ TRIBUTARY_STRIPE_LATE_WINDOW_S: bad }),
      /TRIBUTARY_STRIPE_LATE_WINDOW_S: expected a whole number of seconds from 0/,
      bad,
    );
  }
});

test.run();
