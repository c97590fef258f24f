import http from 'node:http';
import Airtable from 'airtable';
import net from 'node:net';
import pg from 'pg';
import { secretKeyFile } from '../../src/control/bootstrap-files.ts';
import { SecretBox } from '../../src/control/secrets.ts';
import { ServerPool } from '../../src/control/servers.ts';
import { SyncService } from '../../src/control/sync-service.ts';
import { SyncStore } from '../../src/control/syncs.ts';
import { listen } from '../../src/http/listen.ts';
import { createLogger } from '../../src/log.ts';
import { createProxyHandler, type ProxyHandler, type ProxyOptions } from '../../src/proxy/server.ts';
import { QuotaLimiter } from '../../src/quota/limiter.ts';
import { serverAdminUrl } from './postgres.ts';
import { waitForCycle } from './airtable.ts';
import type { Tunables } from '../../src/main.ts';
import { AIRTABLE_TEST_TOKEN, createAccount, request, startTestService, type TestService } from './service.ts';
import { builtInKinds } from '../../src/kinds/built-in.ts';

export interface TestProxy {
  url: string;
  port: number;
  handler: ProxyHandler;
  limiter: QuotaLimiter;
  stop(): Promise<void>;
}

/**
 * The write-through proxy beside a test service: same control database (so the same syncs
 * and the same shared quota as the service's sync workers), same log collector.
 */
export async function startProxy(
  svc: TestService,
  options: Partial<Omit<ProxyOptions, 'pool' | 'syncs' | 'syncService' | 'logger'>> & { noLimiter?: boolean } = {},
): Promise<TestProxy> {
  const pool = new pg.Pool({ connectionString: svc.controlUrl, max: 10 });
  const box = SecretBox.fromBase64((await secretKeyFile(svc.dataDir)).value);
  const logger = createLogger({ level: 'debug', destination: svc.logs }).child({ part: 'proxy' });
  const syncs = new SyncStore(pool, box);
  const kinds = builtInKinds();
  const servers = new ServerPool({ pool, box, configuredUrl: serverAdminUrl(), logger });
  const syncService = new SyncService({ store: syncs, servers, defaultRegion: 'us-west-2', logger, kinds });
  const limiter = new QuotaLimiter({ pool });
  const { noLimiter, ...rest } = options;
  const handler = createProxyHandler({
    pool,
    syncs,
    syncService,
    kinds,
    limiter: noLimiter ? undefined : limiter,
    upstreams: new Map([['api.airtable.com', svc.airtable.url], ...(svc.stripe ? ([['api.stripe.com', svc.stripe.url]] as const) : [])]),
    logger,
    ...rest,
  });
  const server = await listen(handler, { host: '127.0.0.1', port: 0, graceMs: 1000 });
  return {
    url: `http://127.0.0.1:${server.port}`,
    port: server.port,
    handler,
    limiter,
    async stop() {
      await server.close();
      await handler.close();
      await pool.end();
    },
  };
}

export interface RawAnswer {
  status: number;
  statusMessage: string;
  rawHeaders: string[];
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** Parsed JSON body (loosely typed: tests probe shapes). */
  json: any;
}

/** One HTTP/1.1 exchange with node:http, the body kept as bytes. */
export function rawRequest(
  url: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<RawAnswer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname: target.hostname, port: target.port, method, path, headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        let json: unknown;
        try {
          json = JSON.parse(body.toString('utf8'));
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode!, statusMessage: res.statusMessage ?? '', rawHeaders: res.rawHeaders, headers: res.headers, body, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Bytes written straight to a socket: for request lines and framing no client library would send. */
export function rawSocket(url: string, text: string | Buffer, timeoutMs = 5000): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(target.port), target.hostname);
    let out = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(out)?.[1] ?? 0), text: out });
    }, timeoutMs);
    socket.on('data', (c: Buffer) => (out += c.toString('latin1')));
    socket.on('error', (error) => {
      clearTimeout(timer);
      if (out) resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(out)?.[1] ?? 0), text: out });
      else reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(out)?.[1] ?? 0), text: out });
    });
    socket.end(text);
  });
}

export interface TapRecord {
  method: string;
  path: string;
  /** What the upstream received. */
  requestHeaders: http.IncomingHttpHeaders;
  status: number;
  rawHeaders: string[];
  body: Buffer;
}

/**
 * A recording relay in front of an upstream: forwards every request and keeps the exact
 * answer (status, headers, body bytes) it got, so a test can compare what the proxy's
 * client received with what the upstream sent.
 */
export async function startTap(upstream: string): Promise<{ url: string; records: TapRecord[]; close(): Promise<void> }> {
  const target = new URL(upstream);
  const records: TapRecord[] = [];
  const server = http.createServer((req, res) => {
    const out = http.request(
      { hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent: false },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          const body = Buffer.concat(chunks);
          records.push({ method: req.method!, path: req.url!, requestHeaders: req.headers, status: answer.statusCode!, rawHeaders: answer.rawHeaders, body });
          const pairs: string[] = [];
          for (let i = 0; i < answer.rawHeaders.length; i += 2) {
            if (/^(connection|keep-alive|transfer-encoding)$/i.test(answer.rawHeaders[i]!)) continue;
            pairs.push(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
          }
          res.sendDate = false;
          res.writeHead(answer.statusCode!, answer.statusMessage, pairs);
          res.end(body);
        });
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    records,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Headers minus the ones that describe one connection, lower-cased, for comparing two answers. */
export function endToEnd(rawHeaders: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (['connection', 'keep-alive', 'transfer-encoding', 'date'].includes(name)) continue;
    out.push([name, rawHeaders[i + 1]!]);
  }
  return out;
}

/**
 * An Airtable sync of `baseId` for `token`'s account, after its first cycle, and a proxy in
 * front of it with airtable.js pointed at it (no retries of its own on 429).
 */
export async function airtableSyncBehindProxy(svc: TestService, token: string, baseId: string) {
  const before = new Date();
  const created = await request(svc.api, 'POST', '/api/syncs', { token, body: { kind: 'airtable', base_id: baseId, api_key: AIRTABLE_TEST_TOKEN } });
  if (created.status !== 201) throw new Error(`creating the sync: ${created.status} ${created.text}`);
  await waitForCycle(svc, token, created.body.id, before);
  const proxy = await startProxy(svc);
  const airtable = new Airtable({ apiKey: AIRTABLE_TEST_TOKEN, endpointUrl: `${proxy.url}/api.airtable.com`, noRetryIfRateLimited: true }).base(baseId);
  return { syncId: created.body.id as string, reader: created.body.database.url as string, proxy, airtable };
}

/**
 * The service with a proxy, for races between the sync's fetches and proxied writes: an
 * account, a base with a table Tasks (Name, Count) holding `records`, its sync after the first
 * cycle and airtable.js through the proxy. `tunables` set how sweeps and change capture run.
 */
export async function raceSetUp(tunables: Tunables, records: Array<{ Name: string; Count: number }>) {
  const svc = await startTestService({ config: { roles: ['api', 'sync', 'proxy'] }, airtable: { rateLimit: false }, tunables });
  const account = await createAccount(svc);
  const base = svc.airtable.createBase({ name: 'Race base' });
  base.createTable('Tasks', [
    { name: 'Name', type: 'singleLineText' },
    { name: 'Count', type: 'number', options: { precision: 0 } },
  ]);
  base.createRecords('Tasks', records);
  return { svc, account, base, ...(await airtableSyncBehindProxy(svc, account.token, base.id)) };
}
