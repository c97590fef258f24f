/**
 * What the continuous audit costs and finds (docs/stripe.md#the-audit): the change lag of
 * direct customer updates (Stripe's event to the row) with the audit off and on at its default
 * share, the audit's round time against the floor its share sets (its requests in a round over
 * its requests a second), the 429s, and how long silent edits (changes with no event) take to
 * be found and fixed.
 *
 *   node --import tsx bench/stripe-audit.ts [--customers 200] [--rate 2] [--silent 6]
 *
 * The yardstick of the lag is the same run's lag with the audit off. The updates go straight
 * to the fake with stripe-node, within the customer's share of test mode's 25 requests a
 * second; each change's lag runs from its answer to its row. With the audit on, the updates go
 * on until a whole round has completed after the silent edits, so the lag is measured across
 * the audit's busiest stretch.
 */
import pg from 'pg';
import { startFakeStripe } from '../fakes/stripe/index.ts';
import { auditedTables } from '../src/stripe/audit.ts';
import { api, stripeClientOf, arg, percentile, sleep, startPostgres, startServiceProcess, watchCustomerNames } from './lib.ts';

const KEY = 'sk_test_BENCHAUDITAUDIT000000000';
const customersN = arg('customers', 200);
const rate = arg('rate', 2);
const silentN = arg('silent', 6);

const postgres = await startPostgres();
console.log(`Stripe's audit: ${customersN} customers, customer updates at ${rate}/s, ${silentN} silent edits; test mode (25 requests/s)`);
console.log('| audit | updates | lag p50 | lag p99 | p99 against off | 429s | round | round floor (requests / share) | silent edits fixed after (max) |');
console.log('|---|---|---|---|---|---|---|---|---|');

let offP99 = 0;

async function measure(auditOn: boolean): Promise<void> {
  const fake = await startFakeStripe();
  const account = fake.createAccount();
  account.generate({ seed: 7, customers: customersN });
  fake.addKey(KEY, { account: account.id });
  const stripe = stripeClientOf(fake.url, KEY);
  const all = account.all('customers').map((c) => c.id as string);
  const evented = all.slice(0, 20);
  const silent = all.slice(20, 20 + silentN);
  const controlUrl = await postgres.freshDatabase('ctl');
  const svc = await startServiceProcess({
    controlUrl,
    targetUrl: postgres.adminUrl,
    upstreams: `api.stripe.com=${fake.url}`,
    // On: rounds back to back (a round starts a second after the last one began, or at once).
    env: { TRIBUTARY_STRIPE_AUDIT_EVERY_S: auditOn ? '1' : '0' },
  });
  try {
    const tenant = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
    const sync = await api(svc.api, tenant.api_token, 'POST', '/api/syncs', { kind: 'stripe', api_key: KEY });
    const view = () => api(svc.api, tenant.api_token, 'GET', `/api/syncs/${sync.id}`);
    const reader = new pg.Pool({ connectionString: sync.database.url, max: 2 });
    while (!(await view()).status.completed_at) await sleep(250);
    // Past the backfill's upcoming-invoice refreshes, into the steady state.
    await sleep(20_000);
    const refusedBefore = fake.stats.rateLimited;
    const { pending, lags, stop } = watchCustomerNames(reader);
    const silentAt = Date.now();
    for (const [i, id] of silent.entries()) account.silentEdit('customers', id, { name: `silent ${i}` });
    const silentFixed = new Map<string, number>();
    let round: { seconds: number } | undefined;
    const started = Date.now();
    for (let i = 0; ; i++) {
      const target = evented[i % evented.length]!;
      if (!pending.has(target)) {
        const name = `n${i}`;
        await stripe.customers.update(target, { name });
        pending.set(target, { name, at: Date.now() });
      }
      await sleep(1000 / rate);
      if (auditOn && silentFixed.size < silent.length) {
        const { rows } = await reader.query<{ id: string; name: string }>('SELECT id, name FROM customer WHERE id = ANY($1)', [silent]);
        for (const row of rows) if (row.name.startsWith('silent ') && !silentFixed.has(row.id)) silentFixed.set(row.id, Date.now() - silentAt);
      }
      if (auditOn && !round && i % 10 === 0) {
        const a = (await view()).drift.audit;
        if (a?.last_started_at && Date.parse(a.last_started_at) >= silentAt) round = { seconds: a.last_round_seconds };
      }
      if (auditOn ? round && silentFixed.size === silent.length : Date.now() - started > 60_000) break;
      if (Date.now() - started > 600_000) break;
    }
    const deadline = Date.now() + 10_000;
    while (pending.size > 0 && Date.now() < deadline) await sleep(100);
    await stop();
    const share = auditOn ? (await view()).drift.audit.share_per_second : 0;
    // A round's requests: a page per 100 rows of each table it reads, at least one per list.
    let requests = 0;
    for (const t of auditedTables()) {
      const { rows } = await reader.query<{ n: number }>(`SELECT count(*)::int AS n FROM public.${t.table}`);
      requests += Math.max(t.lists.length, Math.ceil(rows[0]!.n / 100));
    }
    const s = (p: number) => (lags.length ? `${(percentile(lags, p) / 1000).toFixed(2)} s` : '–');
    const p99 = lags.length ? percentile(lags, 99) : 0;
    if (!auditOn) offP99 = p99;
    const floor = auditOn ? `${(requests / share).toFixed(0)} s (${requests} / ${share})` : '–';
    console.log(
      `| ${auditOn ? `on (${share}/s)` : 'off'} | ${lags.length} | ${s(50)} | ${s(99)} | ${auditOn && offP99 ? `${(p99 / offP99).toFixed(2)}×` : '–'} | ${fake.stats.rateLimited - refusedBefore} | ${round ? `${round.seconds.toFixed(0)} s` : '–'} | ${floor} | ${auditOn ? `${silentFixed.size}/${silent.length}, ${((Math.max(0, ...silentFixed.values()) || 0) / 1000).toFixed(0)} s` : '–'} |`,
    );
    await reader.end();
  } finally {
    await svc.stop();
    await fake.close();
  }
}

await measure(false);
await measure(true);
await postgres.stop();
process.exit(0);
