/**
 * What reading a trailing window of Stripe's events again costs, and what it saves
 * (docs/stripe.md, "Events Stripe lists late"): the sync's upstream requests a second and the
 * change lag of direct customer updates, with the window off and on, with no event late and
 * with a share of them listed late.
 *
 *   node --import tsx bench/stripe-late-events.ts [--changes 60] [--rate 2] [--late 0.2] [--delay 4000]
 *
 * The yardstick of the cost is the feed's own reads, measured in the same run without the
 * window: the difference between the rows with and without it is what the window costs. The
 * customer's updates go straight to the fake with stripe-node, within its share of test mode's
 * 25 requests a second; each change's lag runs from its answer to its row.
 */
import pg from 'pg';
import { startFakeStripe } from '../fakes/stripe/index.ts';
import { api, stripeClientOf, arg, percentile, sleep, startPostgres, startServiceProcess, watchCustomerNames } from './lib.ts';

const KEY = 'sk_test_BENCHLATEEVENTS000000000';
const changes = arg('changes', 60);
const rate = arg('rate', 2);
const lateShare = arg('late', 0.2);
const delayMs = arg('delay', 4000);

const postgres = await startPostgres();
console.log(`Stripe's late events: ${changes} customer updates at ${rate}/s; late: ${lateShare * 100}% up to ${delayMs} ms`);
console.log('| window | events late | lag p50 | lag p99 | never arrived | /v1/events requests/s |');
console.log('|---|---|---|---|---|---|');

async function measure(windowOn: boolean, late: boolean): Promise<void> {
  const fake = await startFakeStripe();
  const account = fake.createAccount();
  account.generate({ seed: 5, customers: 20 });
  fake.addKey(KEY, { account: account.id });
  const stripe = stripeClientOf(fake.url, KEY);
  const customers = account.all('customers').map((c) => c.id);
  const controlUrl = await postgres.freshDatabase('ctl');
  const svc = await startServiceProcess({
    controlUrl,
    targetUrl: postgres.adminUrl,
    upstreams: `api.stripe.com=${fake.url}`,
    env: windowOn ? {} : { TRIBUTARY_STRIPE_LATE_WINDOW_S: '0' },
  });
  try {
    const tenant = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
    const sync = await api(svc.api, tenant.api_token, 'POST', '/api/syncs', { kind: 'stripe', api_key: KEY });
    const reader = new pg.Pool({ connectionString: sync.database.url, max: 2 });
    for (;;) {
      const view = await api(svc.api, tenant.api_token, 'GET', `/api/syncs/${sync.id}`);
      if (view.status.completed_at) break;
      await sleep(250);
    }
    // Past the backfill's upcoming-invoice refreshes, into the steady state.
    await sleep(20_000);
    if (late) fake.lateEvents.set({ share: lateShare, delayMs, seed: 9 });
    const before = fake.stats.byPath('/v1/events').requests;
    const started = Date.now();
    const { pending, lags, stop } = watchCustomerNames(reader);
    for (let i = 0; i < changes; i++) {
      const target = customers[i % customers.length]!;
      if (pending.has(target)) continue;
      const name = `n${i}`;
      await stripe.customers.update(target, { name });
      pending.set(target, { name, at: Date.now() });
      await sleep(1000 / rate);
    }
    // Long enough for the latest late event to be listed and read again.
    const deadline = Date.now() + delayMs + 20_000;
    while (pending.size > 0 && Date.now() < deadline) await sleep(100);
    await stop();
    fake.lateEvents.set(undefined);
    const seconds = (Date.now() - started) / 1000;
    const feed = (fake.stats.byPath('/v1/events').requests - before) / seconds;
    const s = (ms: number) => (lags.length ? `${(percentile(lags, ms) / 1000).toFixed(2)} s` : '–');
    console.log(
      `| ${windowOn ? 'on (60 s)' : 'off'} | ${late ? `${lateShare * 100}%` : 'none'} | ${s(50)} | ${s(99)} | ${pending.size} | ${feed.toFixed(2)} |`,
    );
    await reader.end();
  } finally {
    await svc.stop();
    await fake.close();
  }
}

await measure(false, false);
await measure(true, false);
await measure(false, true);
await measure(true, true);
await postgres.stop();
process.exit(0);
