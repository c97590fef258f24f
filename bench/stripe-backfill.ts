/**
 * Stripe backfill throughput against what a complete backfill of the same account can reach,
 * side by side with @supabase/stripe-sync-engine, at test mode's limit (25 requests/s) and at
 * live mode's (100); then event-to-row lag under a steady stream of changes (test mode).
 *
 *   node --import tsx bench/stripe-backfill.ts [--customers 1000] [--modes test,live]
 *     [--connected 0] [--per-account 20] [--peer 1] [--latency 0] [--changes 60] [--rate 4] [--timeline] [--paths 8]
 *
 * The ceiling: the fewest requests a complete backfill of the account needs (counted below from
 * the fake's own store, not from the sync), made at the full limit, so the ceiling's time is
 * fewest ÷ limit and Tributary's figure is that time over its own. Objects are the rows landed.
 * Tributary runs with Turbo (the whole limit), as a new user starting a backfill would.
 *
 * With --connected N the account is a platform with N connected accounts of --per-account
 * customers each, followed with the setting connected_accounts; the peer has no Connect, so it
 * backfills each account with a key of its own, one after the other.
 *
 * --latency adds that many ms to every answer, for both, as the way to Stripe and back would.
 * --paths: how many paths the breakdown of Tributary's requests names, most first.
 *
 * Also printed: when the core tables (customer, product, price, subscription, invoice) were
 * complete, as the sync's status said, over the whole backfill's time.
 */
import pg from 'pg';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../fakes/stripe/index.ts';
import { loadCatalog } from '../src/stripe/catalog.ts';
import { runStripeSyncEngineBackfill } from './peers/stripe-sync-engine.ts';
import { api, arg, percentile, postgresCpuSeconds, processTable, sleep, startPostgres, startServiceProcess } from './lib.ts';

const customers = arg('customers', 1000);
const connected = arg('connected', 0);
const perAccount = arg('per-account', 20);
const withPeer = arg('peer', 1) === 1;
const changes = arg('changes', 60);
const rate = arg('rate', 4);
/** Added to every answer of the fake, as the way to Stripe and back would (ms). */
const latency = arg('latency', 0);
const modesArg = process.argv.indexOf('--modes');
const modes = (modesArg > 0 ? String(process.argv[modesArg + 1]) : 'test,live').split(',') as Array<'test' | 'live'>;
const LIMITS = { test: 25, live: 100 };
const CORE = ['customer', 'product', 'price', 'subscription', 'invoice'];

/** Lists a connected account has nothing in: the platform's own Connect objects, and reference data the same for all. */
const NOT_PER_ACCOUNT = [
  '/v1/accounts',
  '/v1/application_fees',
  '/v1/tax_codes',
  '/v1/country_specs',
  '/v1/exchange_rates',
  '/v1/climate/',
  '/v1/reporting/report_types',
];

/**
 * The fewest requests a complete backfill of one account needs, from the fake's store:
 * - every top-level list: its pages of 100, at least one request (an empty list says so once);
 * - lists Stripe offers only under one parent, with no inline or expandable copy: a customer's
 *   payment methods and balance transactions, a product's features, a test clock's customers,
 *   subscriptions and quotes (the top-level lists leave those out), a connected account's
 *   persons and capabilities. One request per parent at least.
 * Lists a parent carries inline (invoice lines, subscription items, a customer's sources and
 * tax ids when expanded) are counted as free: the ceiling is never lower than the truth.
 */
function fewestRequests(account: FakeStripeAccount, platform: boolean): number {
  const paths = new Set<string>();
  for (const table of loadCatalog().tables) {
    for (const list of table.lists) if (!list.parent) paths.add(list.path);
  }
  let requests = 0;
  for (const path of paths) {
    if (!platform && NOT_PER_ACCOUNT.some((p) => path.startsWith(p))) continue;
    // Connected accounts are the platform's own list, not one of its collections.
    const n = path === '/v1/events' ? account.events().length : path === '/v1/accounts' ? account.connectedAccounts().length : account.count(path);
    requests += Math.max(1, Math.ceil(n / 100));
  }
  const each = (resource: string) => account.all(resource);
  const byParent = (resource: string, field: string, parent: string) => each(resource).filter((o) => o[field] === parent).length;
  for (const c of each('customers')) {
    requests += Math.max(1, Math.ceil(byParent('payment_methods', 'customer', String(c.id)) / 100));
    requests += 1; // balance transactions: never more than 100 in the generated accounts
  }
  requests += each('products').length; // features
  requests += each('test_clocks').length * 3;
  if (platform) requests += account.connectedAccounts().length * 2; // persons, capabilities
  return requests;
}

async function countRows(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ t: string }>(
      "SELECT quote_ident(table_name) AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'upcoming_%'",
    );
    let total = 0;
    for (const { t } of rows) total += Number((await client.query(`SELECT count(*) AS n FROM public.${t}`)).rows[0].n);
    return total;
  } finally {
    await client.end();
  }
}

/** Requests by path, ids folded (`/v1/customers/{id}/payment_methods`), most first. */
function breakdown(fake: FakeStripe, top = 8): string {
  const by = new Map<string, number>();
  for (const [path, c] of fake.stats.paths()) {
    const folded = path.replace(/\/[a-z]+_(?=[^/]*[A-Z0-9])[A-Za-z0-9]+(?=\/|$)/g, '/{id}');
    by.set(folded, (by.get(folded) ?? 0) + c.requests);
  }
  return [...by]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([p, n]) => `${p} ${n}`)
    .join(', ');
}

const postgres = await startPostgres();

async function measure(mode: 'test' | 'live'): Promise<void> {
  const limit = LIMITS[mode];
  const fake = await startFakeStripe();
  const platform = fake.createAccount({ livemode: mode === 'live' });
  const key = `sk_${mode}_BENCHBACKFILL${mode.toUpperCase()}00000000`;
  fake.addKey(key, { account: platform.id });
  platform.generate({ seed: 17, customers });
  if (latency > 0) fake.faults.add({ kind: 'delay', delayMs: latency, times: Number.POSITIVE_INFINITY });
  const peerKeys: string[] = [key];
  for (let i = 0; i < connected; ) {
    const answer = await fetch(`${fake.url}/v1/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'type=custom',
    });
    if (answer.status === 429) {
      await answer.text();
      await sleep(1000);
      continue;
    }
    if (!answer.ok) throw new Error(`creating a connected account: ${answer.status} ${await answer.text()}`);
    i++;
  }
  for (const [i, account] of platform.connectedAccounts().entries()) {
    account.generate({ seed: 1000 + i, customers: perAccount });
    const own = `sk_${mode}_BENCHCONNECTED${String(i).padStart(4, '0')}${mode.toUpperCase()}0000`;
    fake.addKey(own, { account: account.id });
    peerKeys.push(own);
  }
  const fewest = fewestRequests(platform, true) + platform.connectedAccounts().reduce((n, a) => n + fewestRequests(a, false), 0);
  const ceilingSeconds = fewest / limit;
  const eventPages = [platform, ...platform.connectedAccounts()].reduce((n, a) => n + Math.max(1, Math.ceil(a.events().length / 100)), 0);
  console.log(
    `\n${mode} mode, ${limit} req/s: ${customers.toLocaleString('en-US')} customers${connected ? ` and ${connected} connected accounts of ${perAccount}` : ''}; a complete backfill needs at least ${fewest.toLocaleString('en-US')} requests: ${ceilingSeconds.toFixed(1)} s at the limit`,
  );

  // The peer first, alone on the account; per account with its own key when connected.
  let peer: { objects: number; seconds: number } | undefined;
  if (withPeer) {
    peer = { objects: 0, seconds: 0 };
    fake.stats.reset();
    for (const [i, peerKey] of peerKeys.entries()) {
      const db = await postgres.freshDatabase(`peer_${mode}_${i}`);
      const run = await runStripeSyncEngineBackfill({ databaseUrl: db, stripeUrl: fake.url, apiKey: peerKey });
      peer.objects += run.objects;
      peer.seconds += run.seconds;
    }
    console.log(
      `  stripe-sync-engine: ${peer.objects.toLocaleString('en-US')} objects in ${peer.seconds.toFixed(1)} s = ${(peer.objects / peer.seconds).toFixed(0)} objects/s; ${fake.stats.requests} requests, ${fake.stats.rateLimited} x 429`,
    );
  }

  const svc = await startServiceProcess({
    controlUrl: await postgres.freshDatabase(`ctl_${mode}`),
    targetUrl: postgres.adminUrl,
    upstreams: `api.stripe.com=${fake.url}`,
  });
  try {
    const tenant = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
    fake.stats.reset();
    const cpuBefore = { service: processTable().get(svc.child.pid!)?.cpu ?? 0, postgres: postgresCpuSeconds(), fake: process.cpuUsage() };
    const started = Date.now();
    const sync = await api(svc.api, tenant.api_token, 'POST', '/api/syncs', {
      kind: 'stripe',
      api_key: key,
      settings: { turbo: true, ...(connected ? { connected_accounts: true } : {}) },
    });
    let coreAt: number | undefined;
    let doneAt: number | undefined;
    // The backfill's own time, as the status gives it (the database's creation before it is left out, as the peer's migrations are).
    let from: number | undefined;
    const timeline: number[] = [];
    while (!doneAt) {
      timeline[Math.floor((Date.now() - started) / 2000)] = fake.stats.requests;
      const view = await api(svc.api, tenant.api_token, 'GET', `/api/syncs/${sync.id}`);
      const p = view.status.progress ?? {};
      if (view.status.started_at) from ??= Date.parse(view.status.started_at);
      // The platform's core tables, then (with connected accounts) every account's.
      const platformCore = view.status.completed_at || (Array.isArray(p.tables_pending) && !CORE.some((t) => p.tables_pending.includes(t)));
      if (!coreAt && platformCore && (!connected || p.accounts_core_ready === connected)) coreAt = Date.now();
      const accountsDone = !connected || (p.accounts_total === connected && p.accounts_done === connected);
      if (view.status.completed_at && accountsDone) doneAt = connected ? Date.now() : Date.parse(view.status.completed_at);
      else await sleep(100);
    }
    from ??= started;
    const seconds = (doneAt - from) / 1000;
    const pgAfter = postgresCpuSeconds();
    const cpu = {
      service: (processTable().get(svc.child.pid!)?.cpu ?? 0) - cpuBefore.service,
      postgres: [...pgAfter].reduce((n, [pid, p]) => n + p.seconds - (cpuBefore.postgres.get(pid)?.seconds ?? 0), 0),
      fake: (() => {
        const u = process.cpuUsage(cpuBefore.fake);
        return (u.user + u.system) / 1e6;
      })(),
    };
    const objects = await countRows(sync.database.url);
    const perSecond = objects / seconds;
    console.log(
      `  Tributary (Turbo): ${objects.toLocaleString('en-US')} objects in ${seconds.toFixed(1)} s = ${perSecond.toFixed(0)} objects/s; ${fake.stats.requests} requests (${(fake.stats.requests / seconds).toFixed(1)}/s), ${fake.stats.rateLimited} x 429`,
    );
    console.log(`    requests: ${breakdown(fake, arg('paths', 8))}`);
    if (process.argv.includes('--timeline')) {
      const rates = timeline.map((n, i) => ((n ?? 0) - (timeline[i - 1] ?? 0)) / 2);
      console.log(`    requests a second, by 2 s: ${rates.map((r) => r.toFixed(0)).join(' ')}`);
    }
    console.log(`    the backfill began ${((from - started) / 1000).toFixed(1)} s after the request that made the sync (its database made)`);
    console.log(
      `    CPU seconds: the service ${cpu.service.toFixed(1)}, PostgreSQL ${cpu.postgres.toFixed(1)}, the fake and this script ${cpu.fake.toFixed(1)}; ${((cpu.service + cpu.postgres + cpu.fake) / seconds).toFixed(2)} cores busy of 2`,
    );
    console.log(`  against the ceiling (${(objects / ceilingSeconds).toFixed(0)} objects/s): ${(ceilingSeconds / seconds).toFixed(3)}`);
    if (connected) {
      // Each account's feed is read while its backfill runs (the change lag needs it): those
      // reads of /v1/events beyond the event pages the ceiling counts share the same limit.
      const feedReads = Math.max(0, fake.stats.byPath('/v1/events').requests - eventPages);
      const withFeed = (fewest + feedReads) / limit;
      // Upcoming-invoice previews are not a feed's read, and are left out of both ceilings.
      const previews = fake.stats.byPath('/v1/invoices/create_preview').requests;
      console.log(
        `  against the ceiling with the feeds' reads (${feedReads.toLocaleString('en-US')} requests more: ${withFeed.toFixed(1)} s): ${(withFeed / seconds).toFixed(3)}; upcoming-invoice previews besides: ${previews}`,
      );
    }
    if (peer) console.log(`  ratio Tributary / stripe-sync-engine: ${(perSecond / (peer.objects / peer.seconds)).toFixed(2)}`);
    console.log(
      `  core tables complete at ${coreAt ? `${((coreAt - from) / 1000).toFixed(1)} s: ${((coreAt - from) / (doneAt - from)).toFixed(2)} of the whole` : 'never seen in the progress'}`,
    );
    if (mode === 'test' && changes > 0) await lag(fake, platform, key, sync.database.url);
  } finally {
    await svc.stop();
    await fake.close();
  }
}

/** Event-to-row lag: updates through the API at a steady rate, while the sync follows the feed. */
async function lag(fake: FakeStripe, account: FakeStripeAccount, key: string, reader: string): Promise<void> {
  // Within the read-only role's connection limit (5 by default).
  const client = new pg.Pool({ connectionString: reader, max: 4 });
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
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
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
}

try {
  for (const mode of modes) await measure(mode);
} finally {
  await postgres.stop();
}
