import Stripe from 'stripe';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../../fakes/stripe/index.ts';
import { STRIPE_API_VERSION } from '../../src/stripe/catalog.ts';
import { startArrivalFront } from '../../sim/upstreams/arrival-front.ts';
import { TcpRelay } from '../../sim/tcp-relay.ts';
import { query, serverAdminUrl } from './postgres.ts';
import { logRefusal } from './refusal-log.ts';
import { createAccount, request, startTestService, type TestAccount, type TestService, type TestServiceOptions, waitBackfilled } from './service.ts';

export interface StripeSyncSetUp {
  fake: FakeStripe;
  upstream: FakeStripeAccount;
  svc: TestService;
  account: TestAccount;
  syncId: string;
  /** The sync database as its read-only role. */
  reader: string;
  /** stripe-node straight to the fake, as the customer's own backend. */
  stripe: Stripe;
  /** The sync as the management API shows it. */
  view(): Promise<any>;
}

/**
 * A fake Stripe with a generated account, the service (API, sync, decoder), an account and a
 * Stripe sync of it whose backfill has completed.
 */
export async function backfilledStripeSync(options: {
  key: string;
  seed: number;
  customers: number;
  pollIntervalMs: number;
  /** Overrides of the service's config (roles, the sync databases' server) and tunables. */
  config?: TestServiceOptions['config'];
  tunables?: TestServiceOptions['tunables'];
  /** Runs before the sync is made (changes its backfill finds, with their events; faults it meets). */
  before?: (stripe: Stripe, fake: FakeStripe) => Promise<void>;
  /** The sync's settings at creation. */
  settings?: Record<string, unknown>;
}): Promise<StripeSyncSetUp> {
  const fake = await startFakeStripe({ trustArrivalStamps: true, onRefusal: logRefusal });
  // The service and the customer's own client reach the fake through an arrival front (a worker
  // thread that stamps each request as it comes): the fake shares this busy process with the
  // service, and counting by its own loop it once saw the sync's well-spaced requests as a burst
  // and answered the customer's direct writes 429 (stripe.connect, five files at a time).
  const front = await startArrivalFront(fake.url);
  const closeFake = fake.close.bind(fake);
  fake.close = async () => {
    await front.close();
    await closeFake();
  };
  const upstream = fake.createAccount();
  upstream.generate({ seed: options.seed, customers: options.customers });
  fake.addKey(options.key, { account: upstream.id });
  const svc = await startTestService({
    config: { roles: ['api', 'sync', 'decoder'], ...options.config },
    tunables: { workerTickMs: 250, stripe: { pollIntervalMs: options.pollIntervalMs }, ...options.tunables },
    stripeUrl: front.url,
  });
  const account = await createAccount(svc);
  const url = new URL(front.url);
  const stripe = new Stripe(options.key, { host: url.hostname, port: Number(url.port), protocol: 'http', apiVersion: STRIPE_API_VERSION as never });
  await options.before?.(stripe, fake);
  const created = await request(svc.api, 'POST', '/api/syncs', {
    token: account.token,
    body: { kind: 'stripe', api_key: options.key, ...(options.settings ? { settings: options.settings } : {}) },
  });
  if (created.status !== 201) throw new Error(`sync create failed: ${created.status} ${created.text}`);
  const syncId: string = created.body.id;
  const view = async () => (await request(svc.api, 'GET', `/api/syncs/${syncId}`, { token: account.token })).body;
  try {
    await waitBackfilled(svc.api, account.token, syncId);
  } catch (error) {
    // The set-up's failure says why: the service's last log lines, since uvu shows only the error.
    throw new Error(
      `${(error as Error).message}\n${svc.logs.lines
        .filter((l) => !l.includes('"msg":"request"'))
        .slice(-30)
        .join('\n')}`,
      { cause: error },
    );
  }
  return { fake, upstream, svc, account, syncId, reader: created.body.database.url, stripe, view };
}

/**
 * A customer's own request to Stripe, retried after a 429 as Stripe asks of its clients
 * (stripe-node retries no 429). The sync takes 80% of the account's limit while it backfills;
 * the customer's direct requests have the rest, 5 a second in test mode, and a test's burst
 * of six beside a busy sync is refused by Stripe as it would be by the fake.
 */
export async function politely<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      if (!(error instanceof Stripe.errors.StripeRateLimitError) || attempt === 5) throw error;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** A relay in front of the test run's sync databases' server, for the hung-path tests (sim/tcp-relay.ts). */
export async function relayToServer(): Promise<TcpRelay> {
  const server = new URL(serverAdminUrl());
  return TcpRelay.start({ host: server.hostname, port: Number(server.port) });
}

/** The sync's database on the server itself, as its owner: reached around any relay. */
export async function directSyncDatabase(controlUrl: string, syncId: string): Promise<string> {
  const [row] = await query<{ database_name: string }>(controlUrl, 'SELECT database_name FROM syncs WHERE id = $1', [syncId]);
  const url = new URL(serverAdminUrl());
  url.pathname = `/${row!.database_name}`;
  return url.toString();
}
