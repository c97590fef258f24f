/** Shared set-up for benchmarks: a real PostgreSQL, the service as a child process, timing helpers. */
import type pg from 'pg';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.ts';
import { ident, withClient, withDatabase } from '../src/db/sql.ts';
import { SERVICE_NODE_FLAGS } from '../src/cli/node-flags.ts';
import { randomLowerAlnum } from '../src/ids.ts';
import { createLogger } from '../src/log.ts';
import Stripe from 'stripe';
import { STRIPE_API_VERSION } from '../src/stripe/catalog.ts';
import { freePort } from '../test/harness/ports.ts';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface BenchPostgres {
  adminUrl: string;
  freshDatabase(prefix: string): Promise<string>;
  stop(): Promise<void>;
}

/** statements: load pg_stat_statements (every statement, nested ones too), for a breakdown by statement. */
export async function startPostgres(options: { statements?: boolean } = {}): Promise<BenchPostgres> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-bench-pg-'));
  const logger = createLogger({ level: 'warn' });
  const port = await freePort();
  let pg: EmbeddedPostgres = await startEmbeddedPostgres({ dir, port, logger });
  if (options.statements) {
    // A preloaded library needs a restart; the settings live in the cluster's auto.conf.
    await withClient(pg.adminUrl, async (c) => {
      await c.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
      await c.query("ALTER SYSTEM SET pg_stat_statements.track = 'all'");
    });
    await pg.stop();
    pg = await startEmbeddedPostgres({ dir, port, logger });
  }
  return {
    adminUrl: pg.adminUrl,
    async freshDatabase(prefix) {
      const name = `${prefix}_${randomLowerAlnum(8)}`;
      await withClient(pg.adminUrl, (c) => c.query(`CREATE DATABASE ${ident(name)}`));
      return withDatabase(pg.adminUrl, name);
    },
    async stop() {
      await pg.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface ServiceProcess {
  api: string;
  adminToken: string;
  child: ChildProcess;
  /** Peak resident set size of the service process so far, in bytes (VmHWM). */
  peakRss(): number;
  rss(): number;
  stop(): Promise<void>;
}

/** The real service (`tributary run`) in its own process, so its memory is measured alone. */
export async function startServiceProcess(options: {
  controlUrl: string;
  targetUrl: string;
  upstreams: string;
  roles?: string;
  env?: Record<string, string>;
  /** TRIBUTARY_PUBLIC_URL is the service's own API: upstreams may notify it (Airtable's webhook pings). */
  publicApi?: boolean;
}): Promise<ServiceProcess> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-bench-svc-'));
  const apiPort = await freePort();
  const adminToken = `tra_bench_${randomLowerAlnum(12)}`;
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, path.join(root, 'bin', 'tributary.js'), 'run', '--roles', options.roles ?? 'api,sync'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: options.controlUrl,
      TRIBUTARY_TARGET_DATABASE_URL: options.targetUrl,
      TRIBUTARY_DATA_DIR: dataDir,
      TRIBUTARY_API_PORT: String(apiPort),
      TRIBUTARY_ADMIN_TOKEN: adminToken,
      TRIBUTARY_UPSTREAMS: options.upstreams,
      TRIBUTARY_LOG_LEVEL: 'warn',
      ...(options.publicApi ? { TRIBUTARY_PUBLIC_URL: `http://127.0.0.1:${apiPort}` } : {}),
      ...options.env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  // A benchmark that dies must not leave its service running.
  process.once('exit', () => child.kill('SIGKILL'));
  const api = `http://127.0.0.1:${apiPort}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${api}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i > 300 || child.exitCode !== null) throw new Error('the service did not start');
    await sleep(100);
  }
  const status = (field: string) => {
    const text = readFileSync(`/proc/${child.pid}/status`, 'utf8');
    return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(text)?.[1] ?? 0) * 1024;
  };
  return {
    api,
    adminToken,
    child,
    peakRss: () => status('VmHWM'),
    rss: () => status('VmRSS'),
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export async function api(base: string, token: string, method: string, route: string, body?: unknown) {
  const response = await fetch(base + route, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  // JSON from our own API; the benchmarks read a few known fields of it.
  const json = (await response.json()) as any;
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

/** Creates an account and an Airtable sync; returns the sync id, the reader URL and the account token. */
export async function createAirtableSync(svc: ServiceProcess, baseId: string, apiKey: string, settings: Record<string, unknown> = {}) {
  const account = await api(svc.api, svc.adminToken, 'POST', '/api/accounts', { name: 'bench' });
  const sync = await api(svc.api, account.api_token, 'POST', '/api/syncs', { kind: 'airtable', base_id: baseId, api_key: apiKey, settings });
  return { syncId: sync.id as string, reader: sync.database.url as string, token: account.api_token as string };
}

/** Waits for the first completed cycle; returns its duration in seconds as the service measured it. */
export async function waitForFirstCycle(svc: ServiceProcess, token: string, syncId: string, onTick?: () => void): Promise<number> {
  for (;;) {
    const sync = await api(svc.api, token, 'GET', `/api/syncs/${syncId}`);
    if (sync.status.completed_at) return sync.status.duration_last as number;
    if (sync.status.last_error) process.stderr.write(`  (sync error: ${sync.status.last_error})\n`);
    onTick?.();
    await sleep(250);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export function arg(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

export const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

/**
 * CPU seconds used so far by each PostgreSQL process on this machine, by its process title
 * ("postgres: walsender …", "postgres: user db …", "postgres: checkpointer"), from /proc.
 * Diff two readings to see where a run's CPU went.
 */
export function postgresCpuSeconds(): Map<number, { title: string; seconds: number }> {
  const ticks = 100; // USER_HZ on Linux
  const found = new Map<number, { title: string; seconds: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      if (!title.startsWith('postgres:')) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      found.set(Number(entry), { title, seconds: (Number(fields[11]) + Number(fields[12])) / ticks });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** CPU seconds per process title between two readings of postgresCpuSeconds (busiest first). */
export function postgresCpuSpent(
  before: Map<number, { title: string; seconds: number }>,
  after: Map<number, { title: string; seconds: number }>,
): Array<{ title: string; seconds: number }> {
  return [...after]
    .map(([pid, { title, seconds }]) => ({ title, seconds: seconds - (before.get(pid)?.seconds ?? 0) }))
    .filter((p) => p.seconds > 0.05)
    .sort((a, b) => b.seconds - a.seconds);
}

/** A process as /proc shows it: its command line, parent and CPU seconds so far. */
export interface ProcessSample {
  title: string;
  ppid: number;
  cpu: number;
  /** CPU seconds of its children that ended (a postmaster's: backends that closed). */
  endedChildren: number;
  /** Seconds its main thread was ready to run but waited for a CPU. */
  waited: number;
}

/** Every process on the machine with its CPU seconds so far (diff two readings for a run's share). */
export function processTable(): Map<number, ProcessSample> {
  const found = new Map<number, ProcessSample>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const waited = Number(readFileSync(`/proc/${entry}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
      found.set(Number(entry), {
        title,
        ppid: Number(fields[1]),
        cpu: (Number(fields[11]) + Number(fields[12])) / 100,
        endedChildren: (Number(fields[13]) + Number(fields[14])) / 100,
        waited,
      });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The postmaster's pid of the server `url` leads to: the parent of a backend of it. */
export async function postmasterOf(url: string): Promise<number> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const stat = readFileSync(`/proc/${rows[0]!.pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  });
}

/**
 * Change lag, as a customer sees it: each change sets a customer's name upstream and is put in
 * `pending` with the time its answer came; the watch reads the rows every 20 ms and records,
 * for each row that shows its name, the time since then.
 */
export function watchCustomerNames(reader: pg.Pool): { pending: Map<string, { name: string; at: number }>; lags: number[]; stop(): Promise<void> } {
  const pending = new Map<string, { name: string; at: number }>();
  const lags: number[] = [];
  let finished = false;
  const watching = (async () => {
    while (!finished) {
      if (pending.size > 0) {
        const { rows } = await reader.query<{ id: string; name: string | null }>('SELECT id, name FROM public.customer WHERE id = ANY($1)', [
          [...pending.keys()],
        ]);
        for (const row of rows) {
          const want = pending.get(row.id);
          if (want && row.name === want.name) {
            lags.push(Date.now() - want.at);
            pending.delete(row.id);
          }
        }
      }
      await sleep(20);
    }
  })();
  return {
    pending,
    lags,
    stop: async () => {
      finished = true;
      await watching;
    },
  };
}

/** stripe-node aimed at a fake Stripe, as a customer's own backend reaches the real one. */
export function stripeClientOf(fakeUrl: string, key: string): Stripe {
  const url = new URL(fakeUrl);
  return new Stripe(key, { host: url.hostname, port: Number(url.port), protocol: 'http', apiVersion: STRIPE_API_VERSION as never, maxNetworkRetries: 3 });
}
