import pg from 'pg';
import { AirtableClient } from '../airtable/client.ts';
import { AirtableRunner } from '../airtable/runner.ts';
import { loadWebhookState, removeWebhook } from '../airtable/webhook.ts';
import { connectionConfig } from '../db/connect.ts';
import type { SyncService } from '../control/sync-service.ts';
import type { AirtableSettings, StripeSettings } from '../control/settings.ts';
import { StripeRunner } from '../stripe/runner.ts';
import type { SyncRecord, SyncStore } from '../control/syncs.ts';
import type { Logger } from '../log.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { upstreamBase } from '../upstream/http.ts';
import type { PassRequests } from './passes.ts';
import { guardReader } from './reader-guard.ts';
import type { Runner } from '../lease/worker.ts';

export interface RunnerFactoryOptions {
  control: pg.Pool;
  store: SyncStore;
  syncService: SyncService;
  limiter: QuotaLimiter;
  upstreams: Map<string, string>;
  logger: Logger;
  /** Tunables for tests: webhook poll interval, pause between cycles. */
  airtable?: { pollIntervalMs?: number; cycleGapMs?: number; timeScale?: number };
  stripe?: { pollIntervalMs?: number };
  /** Wait requests (PassSignals): a sync someone waits on starts its next pass early. */
  passRequests?: PassRequests;
  /** How often a running sync puts its reader role back as provisioned (default 5 min). */
  readerCheckMs?: number;
}

/**
 * Counts a 429 that upstream answered one of the sync's own requests (`upstream_429s`, read
 * by /metrics). Rare by design (the quota keeps the sync under the limit), so one write each.
 */
function rateLimitCounter(control: pg.Pool, syncId: string, logger: Logger): () => void {
  return () => {
    control
      .query('UPDATE syncs SET upstream_429s = upstream_429s + 1 WHERE id = $1', [syncId])
      .catch((err: unknown) => logger.warn({ err }, 'could not count an upstream 429'));
  };
}

function targetPool(url: string, logger: Logger): pg.Pool {
  const pool = new pg.Pool({ ...connectionConfig(url), max: 4 });
  pool.on('error', (err) => logger.warn({ err }, 'idle sync-database connection failed'));
  // A connection the server ends while it is checked out (the database dropped WITH FORCE as
  // the sync is deleted mid-cycle) can emit 'error' twice; pg-pool listens once, and an
  // unheard 'error' would end the process. The failure still reaches the query that ran.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Builds the runner for a sync of any kind; the worker only knows "start" and "stop". */
export function runnerFactory(options: RunnerFactoryOptions): (syncId: string) => Promise<Runner> {
  return async (syncId) => {
    const sync = await options.store.get(syncId);
    if (!sync || sync.state !== 'active') throw new Error(`sync ${syncId} is not active`);
    const logger = options.logger.child({ sync: sync.id });
    const target = targetPool(await options.syncService.adminUrl(sync), logger);
    const shared = { passRequests: options.passRequests, onRateLimited: rateLimitCounter(options.control, sync.id, logger) };
    const runner = sync.kind === 'stripe'
      ? new StripeRunner({
          syncId: sync.id,
          accountId: sync.upstreamAccountId,
          control: options.control,
          target,
          key: await options.store.apiKey(sync.id),
          baseUrl: upstreamBase(options.upstreams, 'api.stripe.com'),
          limiter: options.limiter,
          loadSettings: async () => ((await options.store.get(sync.id))?.settings ?? sync.settings) as StripeSettings,
          logger,
          ...shared,
          ...options.stripe,
        })
      : new AirtableRunner({
      syncId: sync.id,
      baseId: sync.baseId!,
      control: options.control,
      target,
      token: await options.store.apiKey(sync.id),
      baseUrl: upstreamBase(options.upstreams, 'api.airtable.com'),
      limiter: options.limiter,
      loadSettings: async () => ((await options.store.get(sync.id))?.settings ?? sync.settings) as AirtableSettings,
      logger,
      ...shared,
      ...options.airtable,
    });
    let guard: { stop(): void } | undefined;
    return {
      start: () => {
        guard = guardReader(sync, options.syncService, logger, options.readerCheckMs);
        runner.start();
      },
      stop: async () => {
        guard?.stop();
        await runner.stop();
        await target.end();
      },
    };
  };
}

/** Upstream leftovers of a deleted sync: Airtable's webhook (a base may only have 10). */
export function upstreamCleanup(options: Pick<RunnerFactoryOptions, 'store' | 'syncService' | 'upstreams' | 'limiter' | 'logger'>) {
  return async (sync: SyncRecord): Promise<void> => {
    if (sync.kind !== 'airtable') return;
    const target = targetPool(await options.syncService.adminUrl(sync), options.logger);
    try {
      const state = await loadWebhookState(target);
      if (!state) return;
      const client = new AirtableClient({
        baseUrl: upstreamBase(options.upstreams, 'api.airtable.com'),
        token: await options.store.apiKey(sync.id),
        baseId: sync.baseId!,
        limiter: options.limiter,
        quota: { kind: 'client', maxWaitMs: 10_000 },
        attempts: 2,
      });
      await removeWebhook(client, state.id);
    } finally {
      await target.end();
    }
  };
}
