/**
 * A world for webhook tests: one control database, the management API on it, the event bus,
 * sync databases with real tables, events logged as the decoder logs them, real HTTP
 * receivers, and deliverers started by the test.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { authenticator } from '../../src/api/auth.ts';
import { createApiApp } from '../../src/api/server.ts';
import { AccountStore } from '../../src/control/accounts.ts';
import { SecretBox } from '../../src/control/secrets.ts';
import { ServerPool } from '../../src/control/servers.ts';
import { SyncService } from '../../src/control/sync-service.ts';
import { SyncStore } from '../../src/control/syncs.ts';
import { FailedCredentials } from '../../src/credentials/throttle.ts';
import { migrateControlDatabase } from '../../src/db/migrate.ts';
import { ident, withClient, withDatabase } from '../../src/db/sql.ts';
import { EventAppender } from '../../src/events/append.ts';
import { EventBus } from '../../src/events/bus.ts';
import { EventLogReader } from '../../src/events/log.ts';
import { startWebhookDeliverer, type WebhookDeliverer, type WebhookDelivererOptions } from '../../src/events/webhooks/deliverer.ts';
import { listen, type RunningServer } from '../../src/http/listen.ts';
import { newDatabaseName, newSyncId } from '../../src/ids.ts';
import { builtInKinds } from '../../src/kinds/built-in.ts';
import { createLogger } from '../../src/log.ts';
import { ServiceMetrics } from '../../src/metrics/index.ts';
import { SyncTables } from '../../src/api/sync-tables.ts';
import { freshDatabase, serverAdminUrl } from './postgres.ts';
import { LogCollector, request } from './service.ts';

export { request };

/** Retries fast, gives up late: the tests decide what failure looks like. */
export const FAST_SCHEDULE = { initialDelayMs: 20, factor: 2, maxDelayMs: 200, maxAttempts: 10_000, maxAgeMs: 600_000, timeoutMs: 2_000 };
export const FAST_TUNING = { lanes: 4, flushMs: 20, idleMs: 300, refreshMs: 300, reloadGapMs: 20 };

/** The tables each test sync's database has, with their columns (a Stripe sync's collections are its tables). */
const TABLES = {
  customer: ['id text PRIMARY KEY', 'email text', 'status text', 'balance bigint', 'metadata jsonb', 'event text'],
  invoice: ['id text PRIMARY KEY', 'customer text', 'total bigint'],
};

export interface EventSpec {
  id: string;
  kind?: 'inserted' | 'updated' | 'deleted' | 'read';
  collection?: keyof typeof TABLES;
  data?: Record<string, unknown>;
  changes?: Record<string, unknown>;
}

export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  status: number;
  at: number;
}

type Answer = number | 'hang' | 'hold' | 'stream' | { status: number; body?: string; headers?: Record<string, string> };

/**
 * A real HTTP receiver on loopback that answers as `behaviour` says: a status, never, a 204
 * once `release()` is called ('hold'), or an endless 200 body.
 */
export class Receiver {
  readonly requests: Received[] = [];
  behaviour: (body: string) => Answer = () => 204;
  /** Bytes an endless answer got out before the sender closed the connection, per request. */
  readonly streamed: Array<{ bytes: number; closed: boolean }> = [];
  private server: http.Server | undefined;
  private readonly holding: Array<() => void> = [];
  port = 0;

  /** Requests answered 'hold' waiting for release(). */
  get held(): number {
    return this.holding.length;
  }

  /** Answers every held request 204 (taken then, as a slow receiver's are). */
  release(): void {
    for (const answer of this.holding.splice(0)) answer();
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** What it answered 2xx: what the receiver has really taken. */
  get accepted(): Received[] {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300);
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const answer = this.behaviour(body);
        if (answer === 'hang') return;
        const taken = (status: number) =>
          this.requests.push({
            id: String(req.headers['webhook-id']),
            timestamp: String(req.headers['webhook-timestamp']),
            signature: String(req.headers['webhook-signature']),
            body,
            status,
            at: Date.now(),
          });
        if (answer === 'hold') {
          this.holding.push(() => {
            taken(204);
            res.writeHead(204).end();
          });
          return;
        }
        const {
          status,
          body: text,
          headers,
        } = typeof answer === 'number' ? { status: answer, body: undefined, headers: undefined } : answer === 'stream' ? { status: 200 } : answer;
        taken(status);
        if (answer === 'stream') return this.stream(res);
        res.writeHead(status, headers);
        res.end(text);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  /** A 200 whose body never ends: 64 KiB chunks for as long as the connection stays open (or 1 GB). */
  private stream(res: http.ServerResponse): void {
    const seen = { bytes: 0, closed: false };
    this.streamed.push(seen);
    res.writeHead(200, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(65_536, 'x');
    res.on('close', () => (seen.closed = true));
    const more = () => {
      while (!seen.closed && seen.bytes < 1e9) {
        seen.bytes += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
    };
    more();
  }
}

/** Standard Webhooks verification, written from the spec (not from the code under test): any `v1,` signature of the header may match. */
export function verifies(secret: string, received: Received, toleranceSeconds = 300): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const timestamp = Number(received.timestamp);
  if (!Number.isInteger(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = createHmac('sha256', key).update(`${received.id}.${received.timestamp}.${received.body}`).digest();
  return received.signature.split(' ').some((part) => {
    const [version, signature] = part.split(',');
    if (version !== 'v1' || !signature) return false;
    const given = Buffer.from(signature, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The events a receiver took, as {id, kind, n}: `n` is data.n when the event has one. */
export function taken(received: Received[]): Array<{ id: string; kind: string; n: unknown; key: string }> {
  return received.map((r) => {
    const event = JSON.parse(r.body) as { id: string; event: string; data: { n?: unknown } };
    return { id: event.id, kind: event.event, n: event.data.n, key: r.id };
  });
}

export interface WebhookWorld {
  pool: pg.Pool;
  box: SecretBox;
  reader: EventLogReader;
  logs: LogCollector;
  apiUrl: string;
  adminToken: string;
  account: { id: string; token: string };
  /** A Stripe-kind sync whose database has the tables `customer` and `invoice`. */
  newSync(): Promise<string>;
  /** Logs events of a sync, one transaction per call, as the decoder does; answers their keys. */
  log(syncId: string, events: EventSpec[]): Promise<string[]>;
  deliver(syncId: string, options?: Partial<WebhookDelivererOptions>): WebhookDeliverer;
  /**
   * Runs `change` (an API call that changes a webhook's filter, rate or secret) and waits until
   * the running deliverer has taken it, as its log says.
   */
  changed<T>(webhookId: string, change: () => Promise<T>): Promise<T>;
  receiver(): Promise<Receiver>;
  createWebhook(syncId: string, body: Record<string, unknown>): Promise<{ id: string; secret: string; [key: string]: unknown }>;
  stop(): Promise<void>;
}

export async function startWebhookWorld(options: { eventRetentionMs?: number; kafkaBrokers?: string[] } = {}): Promise<WebhookWorld> {
  const logs = new LogCollector();
  const logger = createLogger({ level: 'debug', destination: logs });
  const url = await freshDatabase('hooks');
  await migrateControlDatabase(url, logger);
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  const box = new SecretBox(randomBytes(32));
  const bus = new EventBus({ url, logger });
  await bus.start();
  const reader = new EventLogReader(pool);
  const accounts = new AccountStore(pool, box);
  const syncs = new SyncStore(pool, box);
  const kinds = builtInKinds();
  const servers = new ServerPool({ pool, box, configuredUrl: url, logger });
  await servers.ensureConfigured('us-west-2');
  const syncService = new SyncService({ store: syncs, servers, defaultRegion: 'us-west-2', logger, kinds });
  const adminToken = `tra_${randomBytes(12).toString('hex')}`;
  const syncTables = new SyncTables({ syncService, logger });
  const app = createApiApp({
    syncTables,
    pool,
    accounts,
    syncs,
    syncService,
    servers,
    kinds,
    authenticate: authenticator(accounts, adminToken, new FailedCredentials({ logger })),
    events: { restUrl: 'http://127.0.0.1:1', kafkaBrokers: options.kafkaBrokers ?? [] },
    logger,
    box,
    webhookAllowPrivate: true,
    metrics: new ServiceMetrics({ pool }),
    ...(options.eventRetentionMs ? { eventRetentionMs: options.eventRetentionMs } : {}),
  });
  const api: RunningServer = await listen(app.callback(), { host: '127.0.0.1', port: 0 });
  const apiUrl = `http://127.0.0.1:${api.port}`;
  const created = await accounts.create('alice');
  const account = { id: created.account.id, token: created.apiToken.reveal() };
  const deliverers: WebhookDeliverer[] = [];
  const receivers: Receiver[] = [];
  const appenders = new Map<string, { appender: EventAppender; lsn: number; n: number }>();
  const databases: string[] = [];

  return {
    pool,
    box,
    reader,
    logs,
    apiUrl,
    adminToken,
    account,
    async newSync() {
      const databaseName = newDatabaseName();
      const sync = await syncs.insert({
        id: newSyncId(),
        accountId: account.id,
        kind: 'stripe',
        baseId: null,
        upstreamAccountId: null,
        describeUpstream: () => 'this Stripe key',
        apiKey: 'sk_test_notused',
        settings: { turbo: false } as never,
        databaseName,
        databaseRole: `${databaseName}_ro`,
        databasePassword: 'unused',
        customServerUrl: null,
        region: 'us-west-2',
        upstreamName: null,
      });
      await syncs.setState(sync.id, 'active');
      await withClient(serverAdminUrl(), (admin) => admin.query(`CREATE DATABASE ${ident(databaseName)}`));
      databases.push(databaseName);
      await withClient(withDatabase(serverAdminUrl(), databaseName), async (client) => {
        for (const [table, columns] of Object.entries(TABLES)) await client.query(`CREATE TABLE ${ident(table)} (${columns.join(', ')})`);
      });
      return sync.id;
    },
    async log(syncId, events) {
      let state = appenders.get(syncId);
      if (!state) {
        state = { appender: new EventAppender({ pool, syncId, accountId: account.id }), lsn: 0x1000, n: 0 };
        appenders.set(syncId, state);
      }
      const s = state;
      const logged = events.map((spec) => {
        s.n += 1;
        const kind = spec.kind ?? 'updated';
        const collection = spec.collection ?? 'customer';
        const eventKey = `${syncId}.0/${s.lsn.toString(16).toUpperCase()}.${s.n}`;
        const value = JSON.stringify({
          collection,
          created_at: new Date().toISOString(),
          data: { id: spec.id, n: s.n, ...spec.data },
          event: kind,
          id: spec.id,
          table_db_name: collection,
          ...(kind === 'updated' ? { changes: spec.changes ?? { n: s.n - 1 } } : {}),
        });
        return { collection, recordId: spec.id, eventKey, createdAt: new Date(), value };
      });
      s.lsn += 0x100;
      await s.appender.append(logged, `0/${s.lsn.toString(16).toUpperCase()}`);
      return logged.map((e) => e.eventKey);
    },
    deliver(syncId, more = {}) {
      const deliverer = startWebhookDeliverer({
        pool,
        box,
        syncId,
        reader,
        bus,
        logger,
        allowPrivate: true,
        schedule: FAST_SCHEDULE,
        tuning: FAST_TUNING,
        ...more,
      });
      deliverers.push(deliverer);
      return deliverer;
    },
    async changed(webhookId, change) {
      const from = logs.lines.length;
      const result = await change();
      await until(
        `the deliverer to take the change of ${webhookId}`,
        () => logs.lines.slice(from).some((line) => line.includes(webhookId) && line.includes('webhook destination settings changed')),
        5_000,
      );
      return result;
    },
    async receiver() {
      const receiver = await new Receiver().start();
      receivers.push(receiver);
      return receiver;
    },
    async createWebhook(syncId, body) {
      const answer = await request(apiUrl, 'POST', `/api/syncs/${syncId}/webhooks`, { token: account.token, body });
      if (answer.status !== 201) throw new Error(`creating a webhook: ${answer.status} ${answer.text}`);
      return answer.body;
    },
    async stop() {
      for (const deliverer of deliverers) await deliverer.stop();
      for (const receiver of receivers) await receiver.stop();
      await api.close();
      await syncTables.close();
      await bus.stop();
      await pool.end();
      await withClient(serverAdminUrl(), async (admin) => {
        for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`);
      }).catch(() => undefined);
    },
  };
}
