import Stripe from 'stripe';
import { type FakeStripe, type FakeStripeAccount, startFakeStripe } from '../../fakes/stripe/index.ts';
import { STRIPE_API_VERSION } from '../../src/stripe/catalog.ts';
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
  const fake = await startFakeStripe();
  const upstream = fake.createAccount();
  upstream.generate({ seed: options.seed, customers: options.customers });
  fake.addKey(options.key, { account: upstream.id });
  const svc = await startTestService({
    config: { roles: ['api', 'sync', 'decoder'], ...options.config },
    tunables: { workerTickMs: 250, stripe: { pollIntervalMs: options.pollIntervalMs }, ...options.tunables },
    stripeUrl: fake.url,
  });
  const account = await createAccount(svc);
  const url = new URL(fake.url);
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
