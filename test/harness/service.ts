import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig, type Config } from '../../src/config.ts';
import { startFakeAirtable, type FakeAirtable } from '../../fakes/airtable/index.ts';
import { startFakeStripe, type FakeStripe } from '../../fakes/stripe/index.ts';
import { startArrivalFront } from '../../sim/upstreams/arrival-front.ts';
import { explainRefusalsFrom, logRefusal } from './refusal-log.ts';
import { withDatabase } from '../../src/db/sql.ts';
import { createLogger } from '../../src/log.ts';
import { startService, type Service, type Tunables } from '../../src/main.ts';
import { freshControlDatabase, serverAdminUrl } from './postgres.ts';
import { waitFor } from './process.ts';
import { teeToTestLog } from './test-log.ts';
import type { SourceKinds } from '../../src/kinds/registry.ts';

/** Every log line the service wrote, kept so tests can search them for secrets. */
export class LogCollector extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    const text = chunk.toString('utf8');
    teeToTestLog(text);
    this.lines.push(...text.split('\n').filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

/** The token the harness's fake Airtable accepts for every base. */
export const AIRTABLE_TEST_TOKEN = 'patTESTTESTTEST01.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
/** Bases that exist in the harness's fake Airtable from the start. */
export const TEST_BASES = ['appAAAAAAAAAAAAAA', 'appBBBBBBBBBBBBBB', 'appCCCCCCCCCCCCCC', 'appDDDDDDDDDDDDDD', 'appEEEEEEEEEEEEEE'];

/** Keys the harness's fake Stripe accepts (one account): the tests' stand-ins for a customer's key. */
export const STRIPE_TEST_KEYS = ['sk_test_51HxTestKey0000000000000', 'sk_test_secretStripeKey4242424242', 'sk_test_fromstdin0000', 'sk_test_persist123'];

/** A fake Stripe with one empty account that every STRIPE_TEST_KEYS key reads. */
export async function startHarnessStripe(): Promise<FakeStripe> {
  const stripe = await startFakeStripe({ port: 0, trustArrivalStamps: true, onRefusal: logRefusal });
  const account = stripe.createAccount();
  for (const key of STRIPE_TEST_KEYS) stripe.addKey(key, { account: account.id });
  return stripe;
}

export interface TestServiceOptions {
  config?: Partial<Config>;
  tunables?: Tunables;
  /** Options of the fake Airtable the service is pointed at. */
  airtable?: Parameters<typeof startFakeAirtable>[0];
  /** Where api.stripe.com points (a fake Stripe or stripe-mock). */
  stripeUrl?: string;
  /** The kinds of sync (default: the built-in ones). */
  kinds?: SourceKinds;
}

export interface TestService {
  service: Service;
  airtable: FakeAirtable;
  /** The harness's fake Stripe, unless the test pointed the service elsewhere. */
  stripe?: FakeStripe;
  api: string;
  adminToken: string;
  controlUrl: string;
  logs: LogCollector;
  dataDir: string;
  stop(): Promise<void>;
}

/** The services' data folders (each holds a secret key): removed when the test file ends, stopped or not. */
const dataDirs = new Set<string>();
process.on('exit', () => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * The real service in this process, on its own control database and random ports,
 * creating sync databases on the test run's PostgreSQL server.
 */
export async function startTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const overrides = options.config ?? {};
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tributary-svc-'));
  dataDirs.add(dataDir);
  const airtable = await startFakeAirtable({ port: 0, ...options.airtable });
  airtable.addToken(AIRTABLE_TEST_TOKEN, { bases: '*' });
  for (const id of TEST_BASES) airtable.createBase({ id, name: `Base ${id.slice(3, 6)}` });
  const stripe = options.stripeUrl ? undefined : await startHarnessStripe();
  // The service reaches its fake Stripe through an arrival front (a worker thread that stamps
  // each request as it comes), as backfilledStripeSync does: counted by its own loop, busy with
  // the service beside it, the fake saw the proxy's and the sync's well-spaced requests as a
  // burst and answered 429 (proxy.stripe, in a fresh-clone run).
  const front = stripe ? await startArrivalFront(stripe.url) : undefined;
  const stripeUrl = options.stripeUrl ?? front!.url;
  const controlUrl = overrides.databaseUrl ?? (await freshControlDatabase());
  const unexplain = explainRefusalsFrom(controlUrl);
  const adminToken = `tra_test_${path.basename(dataDir)}`;
  const logs = new LogCollector();
  const config = loadConfig(
    {},
    {
      dataDir,
      databaseUrl: controlUrl,
      targetDatabaseUrl: serverAdminUrl(),
      adminToken,
      apiPort: 0,
      proxyPort: 0,
      eventsPort: 0,
      // Syncs run only where a test asks for them.
      roles: ['api', 'proxy', 'events'],
      upstreams: new Map([
        ['api.airtable.com', airtable.url],
        ['api.stripe.com', stripeUrl],
      ]),
      ...overrides,
    },
  );
  const service = await startService(config, createLogger({ level: 'debug', destination: logs }), options.tunables, { kinds: options.kinds });
  return {
    service,
    airtable,
    stripe,
    api: `http://127.0.0.1:${service.apiPort}`,
    adminToken,
    controlUrl,
    logs,
    dataDir,
    async stop() {
      try {
        await service.stop();
        await airtable.close();
        await front?.close();
        await stripe?.close();
      } finally {
        unexplain();
        await rm(dataDir, { recursive: true, force: true });
        dataDirs.delete(dataDir);
      }
    },
  };
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  /** Parsed JSON; loosely typed because the tests assert its shape. */
  body: any;
  text: string;
}

/** A small JSON client for the management API. */
export async function request(
  base: string,
  method: string,
  route: string,
  options: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined = options.raw;
  if (options.body !== undefined && method !== 'GET' && method !== 'HEAD') {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(base + route, { method, headers, body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

export interface TestAccount {
  id: string;
  token: string;
  eventsUsername: string;
  eventsPassword: string;
}

export async function createAccount(svc: TestService, name = 'acme'): Promise<TestAccount> {
  const answer = await request(svc.api, 'POST', '/api/accounts', { token: svc.adminToken, body: { name } });
  if (answer.status !== 201) throw new Error(`account create failed: ${answer.status} ${answer.text}`);
  return {
    id: answer.body.id,
    token: answer.body.api_token,
    eventsUsername: answer.body.events.username,
    eventsPassword: answer.body.events.password,
  };
}

export const airtableSyncBody = (baseId = 'appAAAAAAAAAAAAAA') => ({
  kind: 'airtable',
  base_id: baseId,
  api_key: AIRTABLE_TEST_TOKEN,
});

export const stripeSyncBody = () => ({ kind: 'stripe', api_key: 'sk_test_51HxTestKey0000000000000' });

/**
 * A before hook that says what failed, with the service's last log lines: uvu swallows a
 * failing before hook silently. `service` is read when the hook fails (it may not exist yet).
 */
export const loudSetUp = (hook: () => Promise<void>, service: () => TestService | undefined) => async () => {
  try {
    await hook();
  } catch (error) {
    process.stderr.write(`set-up failed: ${(error as Error)?.stack ?? String(error)}\n${service()?.logs.lines.slice(-30).join('\n') ?? ''}\n`);
    throw error;
  }
};

/**
 * Waits through the wait endpoint until the sync has caught up with everything done so far;
 * throws with the answer and the sync's last error otherwise.
 */
export async function waitOk(svc: TestService, token: string, syncId: string, timeoutMs = 20_000): Promise<void> {
  const answer = await request(svc.api, 'GET', `/api/wait/${syncId}?timeout=${timeoutMs}`, { token });
  if (answer.status === 200 && answer.body?.ok === true) return;
  const view = await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token });
  throw new Error(`wait answered ${answer.status} ${answer.text}; last error: ${view.body?.status?.last_error}`);
}

/** Waits until the sync's first pass (a backfill, or a first cycle) has completed; answers the sync's view then. */
export async function waitBackfilled(api: string, token: string, syncId: string, timeoutMs = 120_000): Promise<any> {
  return waitFor(
    'the backfill',
    async () => {
      const answer = await request(api, 'GET', `/api/syncs/${syncId}`, { token });
      return answer.body?.status?.completed_at ? answer.body : undefined;
    },
    timeoutMs,
  );
}

/** An Airtable sync of the harness's fake base, once its first sweep completed. */
export interface TestSync {
  id: string;
  /** The reader's URL, as the API answered it. */
  readerUrl: string;
  /** The sync database as its owner (the server's admin role), for writing straight into it. */
  adminUrl: string;
}

export async function createAirtableSync(svc: TestService, account: TestAccount, baseId: string, settings?: Record<string, unknown>): Promise<TestSync> {
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'airtable', base_id: baseId, api_key: AIRTABLE_TEST_TOKEN, ...(settings ? { settings } : {}) },
  });
  if (created.status !== 201) throw new Error(`the sync was not made: ${created.status} ${created.text}`);
  const id = created.body.id as string;
  await waitFor(
    'the first sweep',
    async () => ((await request(svc.api, 'GET', `/api/syncs/${id}`, { token: account.token })).body.status.completed_at ? true : undefined),
    120_000,
  );
  return { id, readerUrl: created.body.database.url, adminUrl: withDatabase(serverAdminUrl(), created.body.database.name) };
}
