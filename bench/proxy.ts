/**
 * The write-through proxy's cost, each case measured against calling the fake directly in
 * the same run.
 *
 *   node --import tsx bench/proxy.ts [--clients 50] [--seconds 10] [--writes 30]
 *
 * 1. Pass-through GET (a one-page listing), `--clients` concurrent keep-alive clients for
 *    `--seconds`: latency p50/p99 and throughput, direct vs through the proxy. The fake runs
 *    with its rate limit off and the proxy without the shared limiter (a 5 req/s quota would
 *    measure the quota, not the proxy); the fake, the proxy and this load generator are three
 *    processes.
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
import { api, arg, percentile, root, sleep, startPostgres, startServiceProcess, waitForFirstCycle } from './lib.ts';

const BENCH_TOKEN = `patBENCH0000000000.${'0123456789abcdef'.repeat(4)}`;
const clients = arg('clients', 50);
const seconds = arg('seconds', 10);
const writes = arg('writes', 30);

const children: ChildProcess[] = [];
process.once('exit', () => children.forEach((c) => c.kill('SIGKILL')));

/** Starts bench/proxy-processes.ts in a mode and returns the JSON line it prints when ready. */
async function child<T>(mode: string, env: Record<string, string> = {}): Promise<{ info: T; child: ChildProcess }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'proxy-processes.ts'), mode], {
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

const f = (ms: number) => `${ms.toFixed(2)} ms`;

const fake = await child<{ url: string; baseId: string; tableId: string }>('fake');
const listPath = `/v0/${fake.info.baseId}/Items?pageSize=10`;

// 1. Pass-through GET.
{
  const passThrough = await child<{ url: string }>('proxy', {
    DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
    TRIBUTARY_TARGET_DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
    TRIBUTARY_SECRET_KEY: randomBytes(32).toString('base64'),
    TRIBUTARY_UPSTREAMS: `api.airtable.com=${fake.info.url}`,
    PROXY_LIMITER: '0',
  });
  // Warm both paths (connections, JIT), then measure direct, proxied, direct again.
  await load(fake.info.url, listPath);
  await load(passThrough.info.url, `/api.airtable.com${listPath}`);
  const direct = await load(fake.info.url, listPath);
  const proxied = await load(passThrough.info.url, `/api.airtable.com${listPath}`);
  const again = await load(fake.info.url, listPath);
  const directRps = (direct.rps + again.rps) / 2;
  const d50 = (percentile(direct.latencies, 50) + percentile(again.latencies, 50)) / 2;
  const d99 = (percentile(direct.latencies, 99) + percentile(again.latencies, 99)) / 2;
  const p50 = percentile(proxied.latencies, 50);
  const p99 = percentile(proxied.latencies, 99);
  console.log(`Pass-through GET, ${clients} concurrent clients, ${seconds} s each (fake: no rate limit; proxy: no shared limiter)`);
  console.log(`  direct   p50 ${f(d50)}  p99 ${f(d99)}  ${directRps.toFixed(0)} req/s`);
  console.log(`  proxied  p50 ${f(p50)}  p99 ${f(p99)}  ${proxied.rps.toFixed(0)} req/s  (errors ${proxied.errors + direct.errors + again.errors})`);
  console.log(`  added latency p50 ${f(p50 - d50)} (target ≤ 1 ms), p99 ${f(p99 - d99)}; throughput ratio ${(proxied.rps / directRps).toFixed(2)}× (target ≥ 0.7×)`);
  passThrough.child.kill('SIGTERM');
}

// 2. Write-through create.
const postgres = await startPostgres();
const secretKey = randomBytes(32).toString('base64');
const svcControl = await postgres.freshDatabase('ctl');
const svc = await startServiceProcess({
  controlUrl: svcControl,
  targetUrl: postgres.adminUrl,
  upstreams: `api.airtable.com=${fake.info.url}`,
  env: { TRIBUTARY_SECRET_KEY: secretKey },
});
try {
  const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
  const sync = await api(svc.api, account.api_token, 'POST', '/api/syncs', { kind: 'airtable', base_id: fake.info.baseId, api_key: BENCH_TOKEN });
  await waitForFirstCycle(svc, account.api_token, sync.id);
  const proxyEnv = (limiter: boolean) => ({
    DATABASE_URL: svcControl,
    TRIBUTARY_TARGET_DATABASE_URL: postgres.adminUrl,
    TRIBUTARY_SECRET_KEY: secretKey,
    TRIBUTARY_UPSTREAMS: `api.airtable.com=${fake.info.url}`,
    PROXY_LIMITER: limiter ? '1' : '0',
  });
  console.log(`\nWrite-through create, one record at a time (${writes} each way, interleaved), the sync running`);
  for (const limiter of [false, true]) {
    const proxy = await child<{ url: string }>('proxy', proxyEnv(limiter));
    const direct: number[] = [];
    const proxied: number[] = [];
    const createPath = `/v0/${fake.info.baseId}/${fake.info.tableId}`;
    for (let i = 0; i < writes + 3; i++) {
      const body = JSON.stringify({ fields: { Name: `Bench ${limiter ? 'L' : 'N'} ${i}`, Amount: i } });
      const a = await call(fake.info.url, 'POST', createPath, body);
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
  fake.child.kill('SIGTERM');
  await postgres.stop();
}
