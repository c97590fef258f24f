/**
 * Change lag of a platform's connected accounts: how long a change made in one of N connected
 * accounts takes to reach its row, by polling each account's feed (no public URL) and by push
 * (Connect webhook deliveries to the service's /hooks route), with the upstream requests
 * each costs.
 *
 *   node --import tsx bench/stripe-connect-lag.ts [--accounts 10,50] [--modes polling,push] [--changes 40] [--rate 2]
 *
 * The fake enforces Stripe's test-mode limit (25 requests/s for the platform and all its
 * connected accounts together); the sync takes 80 % of it, and reads the connected accounts'
 * feeds at half that (10 a second). The yardstick printed beside each polling figure is
 * N ÷ 10 s: the time one read of every account's feed takes at that pace, which bounds how
 * fresh polling can keep N busy accounts.
 */
import pg from 'pg';
import { startFakeStripe } from '../fakes/stripe/index.ts';
import { api, stripeClientOf, arg, percentile, sleep, startPostgres, startServiceProcess, watchCustomerNames } from './lib.ts';

const KEY = 'sk_test_BENCHCONNECTLAG00000000';
/** Reads of connected feeds a second: half the sync's share of test mode's 25. */
const PACE = 10;
const counts = String(process.argv[process.argv.indexOf('--accounts') + 1] ?? '')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const accountCounts = process.argv.includes('--accounts') ? counts : [10, 50];
const changes = arg('changes', 40);
const rate = arg('rate', 2);

const postgres = await startPostgres();
console.log(`Connected accounts' change lag: ${changes} changes at ${rate}/s, fake limit 25 req/s (connected feeds read ${PACE} a second)`);
console.log('| accounts | changes by | lag p50 | lag p99 | N ÷ pace | upstream requests/s |');
console.log('|---|---|---|---|---|---|');

async function measure(accounts: number, push: boolean): Promise<void> {
  const fake = await startFakeStripe();
  const platform = fake.createAccount();
  fake.addKey(KEY, { account: platform.id });
  const stripe = stripeClientOf(fake.url, KEY);
  const customers: Array<{ account: string; id: string }> = [];
  for (let i = 0; i < accounts; i++) {
    const made = await stripe.accounts.create({ type: 'custom' });
    const customer = await stripe.customers.create({ email: `c${i}@bench.example.com` }, { stripeAccount: made.id });
    customers.push({ account: made.id, id: customer.id });
    await sleep(100);
  }
  const controlUrl = await postgres.freshDatabase('ctl');
  const svc = await startServiceProcess({ controlUrl, targetUrl: postgres.adminUrl, upstreams: `api.stripe.com=${fake.url}`, publicApi: push });
  try {
    const tenant = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
    const sync = await api(svc.api, tenant.api_token, 'POST', '/api/syncs', { kind: 'stripe', api_key: KEY, settings: { connected_accounts: true } });
    const reader = new pg.Pool({ connectionString: sync.database.url, max: 2 });
    // Every account found and backfilled: its customer is a row.
    for (;;) {
      const { rows } = await reader
        .query<{ n: string }>('SELECT count(*) AS n FROM public.customer WHERE stripe_account IS NOT NULL')
        .catch(() => ({ rows: [{ n: '0' }] }));
      if (Number(rows[0]!.n) >= accounts) break;
      await sleep(250);
    }
    // Past the reads right after each backfill, into the steady state (idle accounts read less often).
    await sleep(35_000);
    const requestsBefore = fake.stats.requests;
    const started = Date.now();
    const { pending, lags, stop } = watchCustomerNames(reader);
    for (let i = 0; i < changes; i++) {
      const target = customers[Math.floor(Math.random() * customers.length)]!;
      if (pending.has(target.id)) continue;
      const name = `n${i}`;
      await stripe.customers.update(target.id, { name }, { stripeAccount: target.account });
      pending.set(target.id, { name, at: Date.now() });
      await sleep(1000 / rate);
    }
    const deadline = Date.now() + 120_000;
    while (pending.size > 0 && Date.now() < deadline) await sleep(100);
    await stop();
    const seconds = (Date.now() - started) / 1000;
    const perSecond = (fake.stats.requests - requestsBefore) / seconds;
    const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
    console.log(
      `| ${accounts} | ${push ? 'push' : 'polling'} | ${s(percentile(lags, 50))} | ${s(percentile(lags, 99))} | ${(accounts / PACE).toFixed(2)} s | ${perSecond.toFixed(1)} |`,
    );
    if (pending.size > 0) console.log(`  (${pending.size} changes never arrived within 2 minutes)`);
    await reader.end();
  } finally {
    await svc.stop();
    await fake.close();
  }
}

// `--modes polling` or `--modes push` measures one of them only.
const modesArg = process.argv.includes('--modes') ? String(process.argv[process.argv.indexOf('--modes') + 1]) : 'polling,push';
const modes = modesArg.split(',');
for (const n of accountCounts) {
  if (modes.includes('polling')) await measure(n, false);
  if (modes.includes('push')) await measure(n, true);
}
await postgres.stop();
process.exit(0);
