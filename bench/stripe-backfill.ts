/**
 * Stripe backfill throughput, side by side with @supabase/stripe-sync-engine on the same fake
 * account and the same rate limit, then event-to-row lag under a steady stream of changes.
 *
 *   node --import tsx bench/stripe-backfill.ts [--customers 2000] [--turbo 1] [--changes 60] [--rate 4]
 *
 * The fake enforces Stripe's test-mode limit (25 requests/s per account). The bound is
 * requests/s x 100 objects a page: what a backfill could reach if every request were a
 * full page. Tributary's sync takes 80 % of the limit (all of it with Turbo).
 *
 * 1. Backfill: objects landed (rows in every table) over the backfill's duration, for each
 *    (the peer first, each alone on the account).
 * 2. Lag: customers updated through the API at `--rate` per second; time from the API's
 *    answer until the database row shows the change.
 */
import pg from 'pg';
import { startFakeStripe } from '../fakes/stripe/index.ts';
import { runStripeSyncEngineBackfill } from './peers/stripe-sync-engine.ts';
import { api, arg, percentile, sleep, startPostgres, startServiceProcess } from './lib.ts';

const customers = arg('customers', 2000);
const turbo = arg('turbo', 1) === 1;
const changes = arg('changes', 60);
const rate = arg('rate', 4);
const KEY = 'sk_test_BENCHBENCHBENCH000000000';
const LIMIT = 25;

const postgres = await startPostgres();
const fake = await startFakeStripe();
const account = fake.createAccount();
const generated = account.generate({ seed: 17, customers });
fake.addKey(KEY, { account: account.id });
const upstreamObjects = Object.values(generated).reduce((a, b) => a + b, 0);
console.log(
  `Stripe backfill, a generated account: ${customers.toLocaleString('en-US')} customers, ${upstreamObjects.toLocaleString('en-US')} objects; fake limit ${LIMIT} req/s`,
);

async function countRows(url: string, schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ t: string }>(
      "SELECT quote_ident(table_name) AS t FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' AND table_name NOT IN ('_sync_meta', 'migrations') AND table_name NOT LIKE 'upcoming_%'",
      [schema],
    );
    let total = 0;
    for (const { t } of rows) total += Number((await client.query(`SELECT count(*) AS n FROM ${schema}.${t}`)).rows[0].n);
    return total;
  } finally {
    await client.end();
  }
}

// 1a. The peer first, alone on the account (the sync's event polls and upcoming-invoice
// fetches would otherwise share its rate limit).
const peerDb = await postgres.freshDatabase('peer');
fake.stats.reset();
const peer = await runStripeSyncEngineBackfill({ databaseUrl: peerDb, stripeUrl: fake.url, apiKey: KEY });
const peerRequests = fake.stats.byAccount(account.id);

// 1b. Tributary, as a service process.
const svc = await startServiceProcess({
  controlUrl: await postgres.freshDatabase('ctl'),
  targetUrl: postgres.adminUrl,
  upstreams: `api.stripe.com=${fake.url}`,
});
let ours: { objects: number; seconds: number; requests: number; limited: number };
let reader: string;
let token: string;
let syncId: string;
try {
  const tenant = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
  token = tenant.api_token;
  fake.stats.reset();
  const sync = await api(svc.api, token, 'POST', '/api/syncs', { kind: 'stripe', api_key: KEY, settings: { turbo } });
  syncId = sync.id;
  reader = sync.database.url;
  for (;;) {
    const view = await api(svc.api, token, 'GET', `/api/syncs/${syncId}`);
    if (view.status.completed_at) break;
    await sleep(250);
  }
  const requests = fake.stats.byAccount(account.id);
  const admin = reader.replace(/\/\/[^@]+@/, `//${new URL(postgres.adminUrl).username}:${encodeURIComponent(new URL(postgres.adminUrl).password)}@`);
  const state = await new pg.Client({ connectionString: admin });
  await state.connect();
  const { rows } = await state.query("SELECT value FROM public_swap._state WHERE key = 'stripe.backfill'");
  await state.end();
  const seconds = (rows[0].value.completedAt - rows[0].value.startedAt) / 1000;
  ours = { objects: await countRows(admin, 'public'), seconds, requests: requests.requests, limited: requests.rateLimited };
} catch (error) {
  await svc.stop();
  throw error;
}

const share = turbo ? LIMIT : Math.floor(LIMIT * 0.8);
const bound = share * 100;
const oursRate = ours.objects / ours.seconds;
const peerRate = peer.objects / peer.seconds;
console.log(
  `  Tributary (${turbo ? 'Turbo' : 'default share'}, ${share} req/s): ${ours.objects.toLocaleString('en-US')} objects in ${ours.seconds.toFixed(1)} s = ${oursRate.toFixed(0)} objects/s; ${ours.requests} requests (${(ours.requests / ours.seconds).toFixed(1)}/s), ${ours.limited} x 429`,
);
console.log(
  `  stripe-sync-engine: ${peer.objects.toLocaleString('en-US')} objects in ${peer.seconds.toFixed(1)} s = ${peerRate.toFixed(0)} objects/s; ${peerRequests.requests} requests, ${peerRequests.rateLimited} x 429${peer.errors.length ? `; errors: ${peer.errors.join('; ')}` : ''}`,
);
console.log(`  ratio Tributary / stripe-sync-engine: ${(oursRate / peerRate).toFixed(2)}`);
console.log(
  `  Tributary against the bound (${share} req/s x 100 = ${bound} objects/s): ${(oursRate / bound).toFixed(3)}; objects per request ${(ours.objects / ours.requests).toFixed(1)}`,
);

// 2. Event-to-row lag: updates through the API at a steady rate, while the sync follows the feed.
const client = new pg.Pool({ connectionString: reader!, max: 8 });
const ids = account
  .all('customers')
  .slice(0, changes)
  .map((c) => c.id as string);
const lags: number[] = [];
let retried429 = 0;
const watchers: Promise<void>[] = [];
for (let i = 0; i < ids.length; i++) {
  const id = ids[i]!;
  const name = `lag-${i}-${Date.now()}`;
  // Sent directly, like a client not using the proxy: with Turbo the sync may hold the whole
  // quota (the upcoming-invoice fetches after the backfill), so a 429 is retried as clients do.
  let response: Response;
  for (;;) {
    response = await fetch(`${fake.url}/v1/customers/${id}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ name }).toString(),
    });
    if (response.status !== 429) break;
    retried429++;
    await response.text();
    await sleep(500);
  }
  if (!response.ok) throw new Error(`update ${id}: ${response.status} ${await response.text()}`);
  const answered = Date.now();
  watchers.push(
    (async () => {
      for (;;) {
        const { rows } = await client.query('SELECT 1 FROM public.customer WHERE id = $1 AND name = $2', [id, name]);
        if (rows.length) break;
        if (Date.now() - answered > 30_000) throw new Error(`change ${i} never arrived`);
        await sleep(10);
      }
      lags.push(Date.now() - answered);
    })(),
  );
  await sleep(1000 / rate);
}
await Promise.all(watchers);
await client.end();
console.log(`Event-to-row lag, ${changes} customer updates at ${rate}/s through the API (${retried429} x 429 retried before their answer)`);
console.log(
  `  p50 ${(percentile(lags, 50) / 1000).toFixed(2)} s, p99 ${(percentile(lags, 99) / 1000).toFixed(2)} s, max ${(Math.max(...lags) / 1000).toFixed(2)} s (target p99 <= 1 s; the feed is read every 0.5 s)`,
);

await svc.stop();
await fake.close();
await postgres.stop();
