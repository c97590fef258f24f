/**
 * Peer for the Stripe backfill benchmark: `@supabase/stripe-sync-engine` (npm), run in-process
 * against the same local Stripe API and a fresh PostgreSQL database.
 *
 * How it is driven:
 * - Migrations: the package's `runMigrations`. Its SQL always creates the `stripe` schema
 *   (the schema name is written into every file), so another `schema` is had by migrating
 *   into `stripe` and renaming the schema afterwards (the database is fresh).
 * - Client: `StripeSync` builds its own stripe-node client with no way to pass a host, so
 *   that client (the public `stripe` property) is replaced right after construction by one
 *   of the same stripe package with `host`/`port`/`protocol` pointing at `stripeUrl`.
 *   Nothing else of the engine is touched.
 * - Backfill: the same per-object `sync*` methods, in the same order, that
 *   `syncBackfill({ object: 'all' })` calls one after the other. They are called here one by
 *   one so that a failing object type is recorded in `errors` and the next one still runs
 *   (`syncBackfill` stops at the first failure).
 * - Counting: rows in the engine's tables afterwards (what landed), not its own tallies.
 *
 * The package is loaded as CommonJS: its ESM build's `runMigrations` finds its SQL folder
 * through `__dirname`, which ESM lacks, and then skips every migration without a word.
 */
import { createRequire } from 'node:module';
import pg from 'pg';
import type * as SyncEngine from '@supabase/stripe-sync-engine';
import type StripeModule from 'stripe';
import { STRIPE_API_VERSION } from '../../src/stripe/catalog.ts';

export interface PeerBackfill {
  objects: number;
  seconds: number;
  perObject: Record<string, number>;
  errors: string[];
  /** HTTP requests sent to the Stripe API, retries of rate-limited ones included. */
  requests?: number;
  /** Answers that were 429. */
  rateLimited?: number;
}

export interface StripeSyncEngineOptions {
  databaseUrl: string;
  stripeUrl: string;
  apiKey: string;
  /** Schema for the engine's tables; `stripe` unless set. */
  schema?: string;
  /** Stripe-Version sent with every request; the version our own sync pins unless set. */
  apiVersion?: string;
  /**
   * stripe-node as the engine configures it does not retry a 429, so the first one ends
   * that object type's backfill. True (the default) retries 429s with the same back-off our
   * own client uses, so both sides live with the same rate limit; false runs it as shipped.
   */
  retryRateLimited?: boolean;
}

const require = createRequire(import.meta.url);
const engine = require('@supabase/stripe-sync-engine') as typeof SyncEngine;
// The very module the engine's CommonJS build loads, so the replacement client is of its class.
const Stripe = require('stripe') as typeof StripeModule;

type StripeClient = InstanceType<typeof StripeModule>;
type HttpClientInterface = NonNullable<ConstructorParameters<typeof StripeModule>[1]>['httpClient'] & {};
type HttpClientResponse = Awaited<ReturnType<HttpClientInterface['makeRequest']>>;
type EngineLogger = NonNullable<SyncEngine.StripeSyncConfig['logger']>;
type BackfillParams = SyncEngine.SyncBackfillParams;

/** `syncBackfill({ object: 'all' })`'s steps, in its order, named by the keys of its result. */
const STEPS: ReadonlyArray<readonly [string, (sync: SyncEngine.StripeSync, params: BackfillParams) => Promise<SyncEngine.Sync>]> = [
  ['products', (s, p) => s.syncProducts(p)],
  ['prices', (s, p) => s.syncPrices(p)],
  ['plans', (s, p) => s.syncPlans(p)],
  ['customers', (s, p) => s.syncCustomers(p)],
  ['subscriptions', (s, p) => s.syncSubscriptions(p)],
  ['subscriptionSchedules', (s, p) => s.syncSubscriptionSchedules(p)],
  ['invoices', (s, p) => s.syncInvoices(p)],
  ['charges', (s, p) => s.syncCharges(p)],
  ['setupIntents', (s, p) => s.syncSetupIntents(p)],
  ['paymentMethods', (s, p) => s.syncPaymentMethods(p)],
  ['paymentIntents', (s, p) => s.syncPaymentIntents(p)],
  ['taxIds', (s, p) => s.syncTaxIds(p)],
  ['creditNotes', (s, p) => s.syncCreditNotes(p)],
  ['disputes', (s, p) => s.syncDisputes(p)],
  ['earlyFraudWarnings', (s, p) => s.syncEarlyFraudWarnings(p)],
  ['refunds', (s, p) => s.syncRefunds(p)],
  ['checkoutSessions', (s, p) => s.syncCheckoutSessions(p)],
];

/** Where the migrations put the tables, whatever schema they are told. */
const MIGRATED_SCHEMA = 'stripe';
const RETRY_ATTEMPTS = 6;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;
const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The engine reports failures only through its logger (its migrations never throw). */
function capturingLogger(errors: string[]): EngineLogger {
  const ignore = () => {};
  const logger = {
    level: 'info',
    trace: ignore,
    debug: ignore,
    info: ignore,
    warn: ignore,
    fatal: (...args: unknown[]) => logger.error(...args),
    error: (...args: unknown[]) => {
      errors.push(args.map((a) => (a instanceof Error ? a.message : typeof a === 'string' ? a : JSON.stringify(a))).join(' '));
    },
    child: () => logger,
  };
  return logger as unknown as EngineLogger;
}

/** The stripe-node HTTP client with a count of requests and, optionally, 429 retries. */
class CountingHttpClient extends Stripe.HttpClient {
  requests = 0;
  rateLimited = 0;
  private readonly inner = Stripe.createNodeHttpClient();

  constructor(private readonly retryRateLimited: boolean) {
    super();
  }

  override getClientName(): string {
    return this.inner.getClientName();
  }

  override async makeRequest(...args: Parameters<HttpClientInterface['makeRequest']>): Promise<HttpClientResponse> {
    for (let attempt = 1; ; attempt++) {
      this.requests++;
      const response = await this.inner.makeRequest(...args);
      if (response.getStatusCode() !== 429) return response;
      this.rateLimited++;
      if (!this.retryRateLimited || attempt >= RETRY_ATTEMPTS) return response;
      await response.toJSON().catch(() => undefined); // frees the socket
      await sleep(Math.min(8000, 250 * 2 ** (attempt - 1)) * (0.75 + Math.random() / 2));
    }
  }
}

function localStripe(options: StripeSyncEngineOptions, httpClient: CountingHttpClient): StripeClient {
  const url = new URL(options.stripeUrl);
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return new Stripe(options.apiKey, {
    // The engine's own settings: the API version it was given, its app info; stripe-node's defaults otherwise.
    apiVersion: (options.apiVersion ?? STRIPE_API_VERSION) as never,
    appInfo: { name: 'Stripe Postgres Sync' },
    host: url.hostname,
    port: url.port || (protocol === 'https' ? 443 : 80),
    protocol,
    httpClient,
  });
}

async function migrate(databaseUrl: string, schema: string): Promise<void> {
  const failures: string[] = [];
  await engine.runMigrations({ databaseUrl, schema: MIGRATED_SCHEMA, logger: capturingLogger(failures) });
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS ok`, [`${quote(MIGRATED_SCHEMA)}.customers`]);
    if (!rows[0]?.ok) throw new Error(`stripe-sync-engine migrations failed: ${failures.join('; ') || 'no tables were created'}`);
    if (schema !== MIGRATED_SCHEMA) await client.query(`ALTER SCHEMA ${quote(MIGRATED_SCHEMA)} RENAME TO ${quote(schema)}`);
  } finally {
    await client.end();
  }
}

/** Rows in each of the engine's tables (its migrations bookkeeping left out). */
async function countRows(databaseUrl: string, schema: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ name: string }>(
      `SELECT table_name AS name FROM information_schema.tables
        WHERE table_schema = $1 AND table_type = 'BASE TABLE' AND table_name <> 'migrations'
        ORDER BY table_name`,
      [schema],
    );
    const counts: Record<string, number> = {};
    for (const { name } of tables) {
      const { rows } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${quote(schema)}.${quote(name)}`);
      counts[name] = Number(rows[0]?.n ?? 0);
    }
    return counts;
  } finally {
    await client.end();
  }
}

/** Runs stripe-sync-engine's full backfill into `databaseUrl` (a fresh, empty PostgreSQL database; run its migrations first) against the Stripe API at `stripeUrl` (http://127.0.0.1:PORT) with `apiKey`. */
export async function runStripeSyncEngineBackfill(options: StripeSyncEngineOptions): Promise<PeerBackfill> {
  const schema = options.schema ?? MIGRATED_SCHEMA;
  await migrate(options.databaseUrl, schema);

  const errors: string[] = [];
  const sync = new engine.StripeSync({
    poolConfig: { connectionString: options.databaseUrl },
    schema,
    stripeSecretKey: options.apiKey,
    stripeWebhookSecret: '', // webhooks are not used by a backfill
    stripeApiVersion: options.apiVersion ?? STRIPE_API_VERSION,
    autoExpandLists: false,
    backfillRelatedEntities: false,
    logger: capturingLogger(errors),
  });
  const http = new CountingHttpClient(options.retryRateLimited ?? true);
  sync.stripe = localStripe(options, http);

  const params: BackfillParams = { object: 'all' };
  const started = performance.now();
  try {
    for (const [name, step] of STEPS) {
      try {
        await step(sync, params);
      } catch (error) {
        errors.push(`${name}: ${message(error)}`);
      }
    }
  } finally {
    await sync.close();
  }
  const seconds = (performance.now() - started) / 1000;

  const perObject = await countRows(options.databaseUrl, schema);
  const objects = Object.values(perObject).reduce((a, b) => a + b, 0);
  return { objects, seconds, perObject, errors, requests: http.requests, rateLimited: http.rateLimited };
}
