/**
 * One tenant's flood against another tenant's latency.
 *
 *   node --import tsx bench/tenant-flood.ts [--concurrency 1000] [--probes 150] [--warmup 1]
 *
 * The service (api, sync, decoder and events roles, its own process) runs one Airtable sync for
 * each of two accounts. Tenant B repeats a simple request, `GET /api/syncs/:id`, one at a time;
 * the figure is its p50 and p99. The reference, measured in the same run: the same probes with
 * nothing else going on (before the floods, and again after them). Then, route by route, tenant
 * A floods with `concurrency` requests in flight (each repeated as soon as it is answered, 429s
 * included, as a hostile client would) while B's probes run.
 *
 * The flooding client stands for a client on another machine: it runs in a process of its own,
 * and on a machine with more than one core it is pinned to the last core while this process, the
 * service, PostgreSQL and the fake (all started from here, so they inherit it) keep the others,
 * for the idle reference and the floods alike. Without that, on a small machine, the figure
 * measures how much CPU the attacker's own client takes from the service, not how the service
 * shares itself between tenants. `--pin 0` turns it off.
 *
 * Printed per route: A's answers a second and their statuses, the most client backends on the
 * server at once, B's p50 and p99, the p50 against idle (target: within 2×) and the p99
 * (target: under 1 s).
 */
import { execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import pg from 'pg';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { freePort } from '../test/harness/ports.ts';
import { api, arg, percentile, sleep, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

interface Flood {
  label: string;
  url: string;
  headers: Record<string, string>;
  /** Sent as a POST (the event REST interface's /fetch takes its request as a body). */
  body?: string;
}

interface FloodReport {
  requests: number;
  seconds: number;
  statuses: Record<string, number>;
}

if (process.env.TENANT_FLOOD_CHILD) {
  // The flooding tenant: `concurrency` loops, each sending its request again once answered, until stdin closes.
  const { flood, concurrency } = JSON.parse(process.env.TENANT_FLOOD_CHILD) as { flood: Flood; concurrency: number };
  const statuses: Record<string, number> = {};
  let requests = 0;
  let stopping = false;
  process.stdin.resume();
  process.stdin.once('end', () => (stopping = true));
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, i) => {
      while (!stopping) {
        const init = flood.body ? { method: 'POST', body: flood.body } : {};
        const status = await fetch(flood.url.replaceAll('{i}', String(i % 10)), { ...init, headers: flood.headers }).then(
          async (r) => {
            await r.arrayBuffer();
            return String(r.status);
          },
          (error: Error) => (error.cause as { code?: string } | undefined)?.code ?? error.message,
        );
        statuses[status] = (statuses[status] ?? 0) + 1;
        requests++;
      }
    }),
  );
  process.stdout.write(`${JSON.stringify({ requests, seconds: (performance.now() - started) / 1000, statuses } satisfies FloodReport)}\n`);
  process.exit(0);
} else {
  await main();
}

/** The cores this process keeps, and the one the flooding client gets; none when pinning is off or impossible. */
function pinning(): { flood: string } | undefined {
  const cores = os.availableParallelism();
  if (arg('pin', 1) === 0 || cores < 2) return undefined;
  try {
    execFileSync('taskset', ['-a', '-p', '-c', `0-${cores - 2}`, String(process.pid)], { stdio: 'ignore' });
    return { flood: String(cores - 1) };
  } catch {
    console.log('note: taskset is not available: the flooding client shares the cores with the service');
    return undefined;
  }
}

/** Starts tenant A's flood in a process of its own; `stop()` ends it and gives its report. */
function startFlood(flood: Flood, concurrency: number, pinned: { flood: string } | undefined) {
  const node = [process.execPath, '--import', 'tsx', new URL(import.meta.url).pathname];
  const [command, ...args] = pinned ? ['taskset', '-c', pinned.flood, ...node] : node;
  const child = spawn(command!, args, {
    env: { ...process.env, TENANT_FLOOD_CHILD: JSON.stringify({ flood, concurrency }) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop(): Promise<FloodReport> {
      child.stdin.end();
      await exited;
      return JSON.parse(out) as FloodReport;
    },
  };
}

async function main(): Promise<void> {
  const concurrency = arg('concurrency', 1000);
  const probes = arg('probes', 150);
  const warmupSeconds = arg('warmup', 1);
  const pinned = pinning();
  const TOKEN = `patFLOODBENCH0000.${'0123456789abcdef'.repeat(4)}`;

  const postgres = await startPostgres();
  const airtable = await startFakeAirtable({ port: 0 });
  airtable.addToken(TOKEN, { bases: '*' });
  const bases = ['A', 'B'].map((name) => {
    const base = airtable.createBase({ name: `Tenant ${name}` });
    base.createTable('Items', [{ name: 'Name', type: 'singleLineText' }]);
    base.createRecords(
      'Items',
      Array.from({ length: 200 }, (_, i) => ({ Name: `Item ${i}` })),
    );
    return base;
  });
  const eventsPort = await freePort();
  const svc = await startServiceProcess({
    controlUrl: await postgres.freshDatabase('ctl'),
    targetUrl: postgres.adminUrl,
    upstreams: `api.airtable.com=${airtable.url}`,
    roles: 'api,sync,decoder,events',
    env: { TRIBUTARY_EVENTS_PORT: String(eventsPort), TRIBUTARY_PROXY_PORT: String(await freePort()) },
  });
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  try {
    await admin.connect();
    const tenants = [];
    for (const [i, base] of bases.entries()) {
      const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: `tenant ${'AB'[i]}` });
      const sync = await api(svc.api, account.api_token, 'POST', '/api/syncs', { kind: 'airtable', base_id: base.id, api_key: TOKEN });
      await waitForFirstCycle(svc, account.api_token, sync.id);
      tenants.push({
        token: account.api_token as string,
        basic: `Basic ${Buffer.from(`${account.events.username}:${account.events.password}`).toString('base64')}`,
        syncId: sync.id as string,
      });
    }
    const [a, b] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
    // A's first rows are in the event log (its topic exists) before the floods start.
    await api(svc.api, a.token, 'GET', `/api/wait/${a.syncId}?timeout=60000`);
    const bearer = { authorization: `Bearer ${a.token}` };
    const events = `http://127.0.0.1:${eventsPort}`;
    const topic = `svc.${a.syncId}.items`;
    const floods: Flood[] = [
      { label: 'GET /api/syncs/:id/tables', url: `${svc.api}/api/syncs/${a.syncId}/tables`, headers: bearer },
      { label: '/consume long polls (5 s)', url: `${events}/consume/flood/i{i}/${topic}?timeout=5000`, headers: { authorization: a.basic } },
      {
        label: '/fetch long polls (5 s)',
        url: `${events}/fetch`,
        headers: { authorization: a.basic, 'content-type': 'application/json' },
        body: JSON.stringify({ topic, partition: 0, offset: 1_000_000_000, timeout: 5000 }),
      },
      { label: 'GET /api/wait/:id (5 s)', url: `${svc.api}/api/wait/${a.syncId}?timeout=5000`, headers: bearer },
      { label: 'GET /api/syncs/:id/history', url: `${svc.api}/api/syncs/${a.syncId}/history`, headers: bearer },
      { label: 'GET /api/syncs (list)', url: `${svc.api}/api/syncs`, headers: bearer },
      { label: 'GET /api/syncs/:id (the probe itself)', url: `${svc.api}/api/syncs/${a.syncId}`, headers: bearer },
    ];

    /** B's probes, one at a time: latencies in ms; meanwhile the most client backends on the server. */
    const probe = async () => {
      let stopped = false;
      let backends = 0;
      const sampling = (async () => {
        while (!stopped) {
          const { rows } = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'");
          backends = Math.max(backends, rows[0]!.n);
          await sleep(50);
        }
      })();
      const took: number[] = [];
      for (let i = 0; i < probes; i++) {
        const started = performance.now();
        const response = await fetch(`${svc.api}/api/syncs/${b.syncId}`, { headers: { authorization: `Bearer ${b.token}` } });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`tenant B's probe answered ${response.status}`);
        took.push(performance.now() - started);
        await sleep(10);
      }
      stopped = true;
      await sampling;
      return { p50: percentile(took, 50), p99: percentile(took, 99), backends };
    };

    const idle = await probe();
    const rows: string[] = [];
    for (const flood of floods) {
      const flooding = startFlood(flood, concurrency, pinned);
      await sleep(warmupSeconds * 1000);
      const under = await probe();
      const done = await flooding.stop();
      const statuses = Object.entries(done.statuses)
        .sort((x, y) => y[1] - x[1])
        .map(([status, n]) => `${status}×${n}`)
        .join(' ');
      rows.push(
        `| ${flood.label} | ${(done.requests / done.seconds).toFixed(0)}/s (${statuses}) | ${under.backends} | ${ms(under.p50)} | ${ms(under.p99)} | ${(under.p50 / idle.p50).toFixed(1)}× | ${under.p99 < 1000 ? 'yes' : 'no'} |`,
      );
      // Let the flood's last long polls and waits end before the next one.
      await sleep(6_000);
    }
    const after = await probe();

    console.log(`Tenant B's GET /api/syncs/:id (${probes} probes) while tenant A floods one route, ${concurrency} requests in flight`);
    console.log(pinned ? `  the flooding client on core ${pinned.flood}, everything else on the other cores` : '  the flooding client shares the cores');
    console.log(
      `  idle: p50 ${ms(idle.p50)}, p99 ${ms(idle.p99)}, ${idle.backends} client backends; after the floods: p50 ${ms(after.p50)}, p99 ${ms(after.p99)}`,
    );
    console.log('');
    console.log('| A floods | A answered (statuses) | backends at most | B p50 | B p99 | B p50 ÷ idle (≤ 2×) | B p99 < 1 s |');
    console.log('|---|---|---|---|---|---|---|');
    for (const row of rows) console.log(row);
  } finally {
    await admin.end().catch(() => undefined);
    await svc.stop();
    await airtable.close();
    await postgres.stop();
  }
}

function ms(value: number): string {
  return value < 10 ? `${value.toFixed(1)} ms` : `${value.toFixed(0)} ms`;
}
