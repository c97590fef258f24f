/**
 * The write-through proxy's cost, each case measured against calling the fake directly in
 * the same run.
 *
 *   node --import tsx bench/proxy.ts [--clients 50] [--seconds 10] [--writes 30]
 *
 * 1. Pass-through GET (a one-page listing), `--clients` concurrent keep-alive clients for
 *    `--seconds`, three rounds each way, interleaved: latency p50/p99 and throughput, direct vs
 *    through the proxy (medians of the rounds). Flat out (closed loop) the latency is the
 *    queue's length, clients / throughput; so the added latency is also measured with the
 *    same clients paced at half the direct throughput (open loop), and one request at a time. The fake runs with its rate limit off and the
 *    proxy without the shared limiter (a 5 req/s quota would measure the quota, not the
 *    proxy). The fake lives in this process with the clients, "the upstream side"; the proxy
 *    in its own process, as deployed (Node uses one core per process).
 * 2. Write-through create (one record, POST /v0/{base}/{table}): latency direct vs through
 *    the proxy, which also writes the record to the sync's database before answering. The
 *    service (api and sync roles) runs an Airtable sync of the base; creates go one at a
 *    time, interleaved, below the base's quota; once without and once with the shared limiter.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { startFakeAirtable } from '../fakes/airtable/index.ts';
import { api, arg, percentile, root, sleep, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

const BENCH_TOKEN = `patBENCH0000000000.${'0123456789abcdef'.repeat(4)}`;
const clients = arg('clients', 50);
const seconds = arg('seconds', 10);
const writes = arg('writes', 30);

const children: ChildProcess[] = [];
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Starts bench/proxy-process.ts in a mode (`proxy`) and returns the JSON line it prints when ready. */
async function child<T>(mode: string, env: Record<string, string> = {}): Promise<{ info: T; child: ChildProcess }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'proxy-process.ts'), mode], {
    env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn', BENCH_TOKEN, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(proc);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`${mode} exited with ${code}`)));
  });
  return { info: JSON.parse(line) as T, child: proc };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: clients });

function call(url: string, method: string, pathname: string, body?: string): Promise<{ status: number; ms: number }> {
  const target = new URL(url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        hostname: target.hostname,
        port: target.port,
        method,
        path: pathname,
        agent,
        headers: { authorization: `Bearer ${BENCH_TOKEN}`, ...(body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - started }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** `clients` loops for `seconds`: every latency, and requests per second. */
async function load(url: string, pathname: string): Promise<{ latencies: number[]; rps: number; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        const { status, ms } = await call(url, 'GET', pathname);
        if (status === 200) latencies.push(ms);
        else errors++;
      }
    }),
  );
  return { latencies, rps: latencies.length / ((performance.now() - started) / 1000), errors };
}

/**
 * `clients` connections sending `rps` requests a second between them, each on its own fixed
 * schedule (open loop), for `seconds`: the latency of every request. Below saturation, so
 * the figure is the hop's cost and not the length of a queue.
 */
async function paced(url: string, pathname: string, rps: number): Promise<{ latencies: number[]; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const interval = (1000 * clients) / rps;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      let next = performance.now() + Math.random() * interval;
      while (next < until) {
        const early = next - performance.now();
        if (early > 0) await sleep(early);
        const { status, ms } = await call(url, 'GET', pathname);
        if (status === 200) latencies.push(ms);
        else errors++;
        next += interval;
      }
    }),
  );
  return { latencies, errors };
}

const f = (ms: number) => `${ms.toFixed(2)} ms`;
const median = (values: number[]) => percentile(values, 50);

// The upstream side: a fake Airtable without rate limits, one small table with a formula.
const airtable = await startFakeAirtable({ port: 0, rateLimit: false });
airtable.addToken(BENCH_TOKEN, { bases: '*' });
const benchBase = airtable.createBase({ name: 'Bench' });
benchBase.createTable('Items', [
  { name: 'Name', type: 'singleLineText' },
  { name: 'Amount', type: 'number', options: { precision: 0 } },
]);
benchBase.addField('Items', { name: 'Double', type: 'formula', options: { formula: '{Amount} * 2' } });
benchBase.createRecords(
  'Items',
  Array.from({ length: 10 }, (_, i) => ({ Name: `Item ${i}`, Amount: i + 1 })),
);
const fake = { url: airtable.url, baseId: benchBase.id, tableId: benchBase.table('Items').id };
const listPath = `/v0/${fake.baseId}/Items?pageSize=10`;

// 1. Pass-through GET.
{
  const passThrough = await child<{ url: string }>('proxy', {
    DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
    TRIBUTARY_TARGET_DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
    TRIBUTARY_SECRET_KEY: randomBytes(32).toString('base64'),
    TRIBUTARY_UPSTREAMS: `api.airtable.com=${fake.url}`,
    PROXY_LIMITER: '0',
  });
  // Warm both paths (connections, JIT), then rounds of direct and proxied in turn.
  await load(fake.url, listPath);
  await load(passThrough.info.url, `/api.airtable.com${listPath}`);
  const rounds: Array<{ direct: Awaited<ReturnType<typeof load>>; proxied: Awaited<ReturnType<typeof load>> }> = [];
  for (let round = 0; round < 3; round++) {
    const direct = await load(fake.url, listPath);
    const proxied = await load(passThrough.info.url, `/api.airtable.com${listPath}`);
    rounds.push({ direct, proxied });
  }
  const d50 = median(rounds.map((r) => percentile(r.direct.latencies, 50)));
  const d99 = median(rounds.map((r) => percentile(r.direct.latencies, 99)));
  const p50 = median(rounds.map((r) => percentile(r.proxied.latencies, 50)));
  const p99 = median(rounds.map((r) => percentile(r.proxied.latencies, 99)));
  const directRps = median(rounds.map((r) => r.direct.rps));
  const proxiedRps = median(rounds.map((r) => r.proxied.rps));
  const errors = rounds.reduce((n, r) => n + r.direct.errors + r.proxied.errors, 0);
  console.log(`Pass-through GET, ${clients} concurrent clients, 3 rounds of ${seconds} s each way (fake: no rate limit; proxy: no shared limiter)`);
  console.log(`  direct   p50 ${f(d50)}  p99 ${f(d99)}  ${directRps.toFixed(0)} req/s`);
  console.log(`  proxied  p50 ${f(p50)}  p99 ${f(p99)}  ${proxiedRps.toFixed(0)} req/s  (errors ${errors})`);
  console.log(`  rounds' throughput ratios ${rounds.map((r) => (r.proxied.rps / r.direct.rps).toFixed(2)).join(', ')}`);
  console.log(
    `  added latency p50 ${f(p50 - d50)} (target ≤ 1 ms), p99 ${f(p99 - d99)}; throughput ratio ${(proxiedRps / directRps).toFixed(2)}× (target ≥ 0.7×)`,
  );

  // The same 50 clients at a steady half of the direct throughput: latency without queueing.
  const rate = Math.round(directRps / 2);
  const pacedRounds: Array<{ direct: number[]; proxied: number[]; errors: number }> = [];
  for (let round = 0; round < 3; round++) {
    const direct = await paced(fake.url, listPath, rate);
    const proxied = await paced(passThrough.info.url, `/api.airtable.com${listPath}`, rate);
    pacedRounds.push({ direct: direct.latencies, proxied: proxied.latencies, errors: direct.errors + proxied.errors });
  }
  const q = (which: 'direct' | 'proxied', p: number) => median(pacedRounds.map((r) => percentile(r[which], p)));
  console.log(`  ${clients} clients paced at ${rate} req/s together (half the direct throughput), 3 rounds each way:`);
  console.log(
    `    direct p50 ${f(q('direct', 50))} p99 ${f(q('direct', 99))} | proxied p50 ${f(q('proxied', 50))} p99 ${f(q('proxied', 99))} | added p50 ${f(q('proxied', 50) - q('direct', 50))} (target ≤ 1 ms), p99 ${f(q('proxied', 99) - q('direct', 99))} (errors ${pacedRounds.reduce((n, r) => n + r.errors, 0)})`,
  );

  // The hop itself, with nothing queued: one client, one request at a time.
  const single = { direct: [] as number[], proxied: [] as number[] };
  for (let i = 0; i < 2000; i++) {
    single.direct.push((await call(fake.url, 'GET', listPath)).ms);
    single.proxied.push((await call(passThrough.info.url, 'GET', `/api.airtable.com${listPath}`)).ms);
  }
  const s50 = percentile(single.proxied, 50) - percentile(single.direct, 50);
  const s99 = percentile(single.proxied, 99) - percentile(single.direct, 99);
  console.log(
    `  one client at a time: direct p50 ${f(percentile(single.direct, 50))}, proxied p50 ${f(percentile(single.proxied, 50))}; added p50 ${f(s50)}, p99 ${f(s99)}`,
  );
  passThrough.child.kill('SIGTERM');
}

// 2. Write-through create.
const postgres = await startPostgres();
const secretKey = randomBytes(32).toString('base64');
const svcControl = await postgres.freshDatabase('ctl');
const svc = await startServiceProcess({
  controlUrl: svcControl,
  targetUrl: postgres.adminUrl,
  upstreams: `api.airtable.com=${fake.url}`,
  env: { TRIBUTARY_SECRET_KEY: secretKey },
});
try {
  const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
  const sync = await api(svc.api, account.api_token, 'POST', '/api/syncs', { kind: 'airtable', base_id: fake.baseId, api_key: BENCH_TOKEN });
  await waitForFirstCycle(svc, account.api_token, sync.id);
  const proxyEnv = (limiter: boolean) => ({
    DATABASE_URL: svcControl,
    TRIBUTARY_TARGET_DATABASE_URL: postgres.adminUrl,
    TRIBUTARY_SECRET_KEY: secretKey,
    TRIBUTARY_UPSTREAMS: `api.airtable.com=${fake.url}`,
    PROXY_LIMITER: limiter ? '1' : '0',
  });
  console.log(`\nWrite-through create, one record at a time (${writes} each way, interleaved), the sync running`);
  for (const limiter of [false, true]) {
    const proxy = await child<{ url: string }>('proxy', proxyEnv(limiter));
    const direct: number[] = [];
    const proxied: number[] = [];
    const createPath = `/v0/${fake.baseId}/${fake.tableId}`;
    for (let i = 0; i < writes + 3; i++) {
      const body = JSON.stringify({ fields: { Name: `Bench ${limiter ? 'L' : 'N'} ${i}`, Amount: i } });
      const a = await call(fake.url, 'POST', createPath, body);
      const b = await call(proxy.info.url, 'POST', `/api.airtable.com${createPath}`, body);
      if (a.status !== 200 || b.status !== 200) throw new Error(`create failed: ${a.status} / ${b.status}`);
      // The first few warm connections and pools up.
      if (i >= 3) {
        direct.push(a.ms);
        proxied.push(b.ms);
      }
      // Below the base's 5 req/s with the sync's 3 (and its own direct create counted by the fake only).
      await sleep(limiter ? 700 : 200);
    }
    const d50 = percentile(direct, 50);
    const p50 = percentile(proxied, 50);
    console.log(
      `  ${limiter ? 'with the shared limiter ' : 'without a limiter       '} direct p50 ${f(d50)} p99 ${f(percentile(direct, 99))} | proxied p50 ${f(p50)} p99 ${f(percentile(proxied, 99))} | added p50 ${f(p50 - d50)} (target ≤ 5 ms)`,
    );
    proxy.child.kill('SIGTERM');
  }
} finally {
  await svc.stop();
  await airtable.close();
  await postgres.stop();
}
