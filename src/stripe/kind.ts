import { z } from 'zod';
import { STRIPE_DEFAULT_SETTINGS, type StripeSettings, stripeSettingsSchema } from './settings.ts';
import type { CleanupContext, RunnerContext, SourceKind } from '../kinds/kind.ts';
import { StripeClient, stripeQuotaKey, stripeRule } from './client.ts';
import { removeConnectEndpoint, stripeInbound } from './push.ts';
import { stripeCheck } from './check.ts';
import { STRIPE_MIGRATIONS } from './migrations.ts';
import { prepareStripeDatabase } from './prepare.ts';
import { stripePlanner } from './proxy/plan.ts';
import { StripeRunner, type StripeRunnerOptions } from './runner.ts';
import { stripeTables, UPCOMING } from './tables.ts';

/** Stripe tunables: how often the events feed is read (tests), how often unreadable lists are tried again. */
export type StripeTunables = Pick<
  StripeRunnerOptions,
  'pollIntervalMs' | 'recheckSkippedMs' | 'discoverAccountsMs' | 'pushedPollMs' | 'connectPollsPerSecond' | 'lateEvents' | 'audit'
>;

const upcomingKeys = new Map<string, string>(Object.values(UPCOMING).map((u) => [u.table, u.key]));

/** A Stripe account: one table per object type, whose collections are object types (`checkout.session`). */
export const stripeKind: SourceKind = {
  name: 'stripe',
  upstreamHost: 'api.stripe.com',
  createFields: {
    api_key: z
      .string()
      .max(512)
      .regex(/^(sk|rk)_(test|live)_[A-Za-z0-9]+$/, 'must be a Stripe secret or restricted key (sk_test_…, rk_test_…, sk_live_…, rk_live_…)'),
  },
  settings: { schema: stripeSettingsSchema, defaults: STRIPE_DEFAULT_SETTINGS },
  keyNamesAccount: true,
  syncDatabaseMigrations: STRIPE_MIGRATIONS,
  proxy: { barePrefix: 'v1', planner: stripePlanner },
  // Connect webhook deliveries (connected accounts, with a public URL): they wake the account's reader.
  inbound: stripeInbound,
  /** The Connect webhook endpoint the sync registered, if any, and any at its URL it never recorded. */
  async cleanup(context: CleanupContext) {
    const key = context.key.reveal();
    const client = new StripeClient({
      baseUrl: context.baseUrl,
      key: context.key,
      limiter: context.limiter,
      quotaKey: stripeQuotaKey(context.sync.upstreamAccountId, key),
      quota: { kind: 'client', maxWaitMs: 10_000 },
      rule: stripeRule(key),
      attempts: 2,
    });
    await removeConnectEndpoint(client, context.target, { schemas: context.schemas, running: false, url: context.hookUrl });
  },
  describeUpstream: (sync) => (sync.upstreamAccountId ? `Stripe account ${sync.upstreamAccountId}` : 'this Stripe key'),
  events: {
    collectionOf: (table) => {
      if (table.startsWith('_')) return undefined;
      // The upcoming invoices' tables keep their names: they are no object type of Stripe's.
      if (upcomingKeys.has(table)) return table;
      return stripeTables().get(table)?.object;
    },
    // Tables whose ids repeat across accounts are keyed `<account>/<id>` (tables.ts).
    keyOf: (table) => stripeTables().get(table)?.shape.key ?? 'id',
  },
  describeTable(table) {
    if (upcomingKeys.has(table)) return { upstreamName: `upcoming invoice (${table.replace(/^upcoming_|_invoice$/g, '')})`, upstreamId: null };
    return { upstreamName: stripeTables().get(table)?.object ?? null, upstreamId: null };
  },
  check(input, context) {
    return stripeCheck({ baseUrl: context.baseUrl, limiter: context.limiter })(input);
  },
  // Built before the sync is announced, so a proxied write right after finds its tables.
  prepareDatabase: prepareStripeDatabase,
  templateVersion: () => JSON.stringify([...stripeTables()]),
  runner(context: RunnerContext) {
    const { sync } = context;
    return new StripeRunner({
      syncId: sync.id,
      accountId: sync.upstreamAccountId,
      control: context.control,
      target: context.target,
      key: context.key,
      baseUrl: context.baseUrl,
      limiter: context.limiter,
      loadSettings: () => context.loadSettings() as Promise<StripeSettings>,
      logger: context.logger,
      passRequests: context.passRequests,
      ...(context.hooks ? { hooks: context.hooks } : {}),
      onRateLimited: context.onRateLimited,
      liveness: context.liveness,
      ...(context.tunables as StripeTunables | undefined),
    });
  },
};
