import { z } from 'zod';
import { AIRTABLE_DEFAULT_SETTINGS, type AirtableSettings, airtableSettingsSchema } from './settings.ts';
import type { CleanupContext, RunnerContext, SourceKind } from '../kinds/kind.ts';
import { pingSigned, verifyPing } from './ping.ts';
import { airtableCheck } from './check.ts';
import { clientForSync } from './kind-client.ts';
import { airtableAttachments } from './attachments.ts';
import { AirtableRunner, type AirtableRunnerOptions } from './runner.ts';
import { airtablePlanner, airtableQuota, airtableSyncCredentials } from './proxy/plan.ts';
import { loadWebhookState, removeWebhook } from './webhook.ts';

/** The COMMENT a synced table carries: its Airtable name and id. */
const TABLE_COMMENT = /^Airtable table "(.*)" \((tbl[A-Za-z0-9]+)\)$/s;

/**
 * Airtable tunables: webhook poll interval, pause between cycles, time scale (tests and
 * benchmarks), the syncs' share of a user's quota (TRIBUTARY_AIRTABLE_USER_SYNC_SHARE) and a
 * paced cycle's duration (TRIBUTARY_AIRTABLE_PACED_CYCLE_S).
 */
export type AirtableTunables = Pick<
  AirtableRunnerOptions,
  'pollIntervalMs' | 'pingedPollIntervalMs' | 'cycleGapMs' | 'timeScale' | 'userSyncShare' | 'pacedCycleMs'
>;

/** An Airtable base, one table per Airtable table, one event collection per table. */
export const airtableKind: SourceKind = {
  name: 'airtable',
  // Every name it writes comes from the sync's schemas: a base may go into another sync's database.
  sharesDatabase: true,
  upstreamHost: 'api.airtable.com',
  createFields: {
    base_id: z.string().regex(/^app[A-Za-z0-9]{14}$/, 'must be an Airtable base id (app followed by 14 letters or digits)'),
    api_key: z.string().min(1).max(512).regex(/^\S+$/, 'must not contain white space'),
  },
  settings: { schema: airtableSettingsSchema, defaults: AIRTABLE_DEFAULT_SETTINGS },
  describeUpstream: (sync) => `base ${sync.baseId}`,
  proxy: { barePrefix: 'v0', earlyQuota: airtableQuota, syncCredentials: airtableSyncCredentials, planner: airtablePlanner },
  events: {
    // Tables of Tributary's own (`_sync_meta`) are bookkeeping, not records.
    collectionOf: (table) => (table.startsWith('_') ? undefined : table),
    keyOf: () => 'id',
  },
  describeTable(_table, comment) {
    const match = TABLE_COMMENT.exec(comment ?? '');
    return { upstreamName: match?.[1] ?? null, upstreamId: match?.[2] ?? null };
  },
  async check(input, context) {
    return (await airtableCheck({ baseUrl: context.baseUrl, limiter: context.limiter, control: context.control })(input)) ?? {};
  },
  runner(context: RunnerContext) {
    const { sync } = context;
    return new AirtableRunner({
      syncId: sync.id,
      baseId: sync.baseId!,
      control: context.control,
      target: context.target,
      schemas: context.schemas,
      token: context.key,
      baseUrl: context.baseUrl,
      limiter: context.limiter,
      loadSettings: () => context.loadSettings() as Promise<AirtableSettings>,
      logger: context.logger,
      passRequests: context.passRequests,
      onRateLimited: context.onRateLimited,
      hooks: context.hooks,
      liveness: context.liveness,
      attachmentLinks: context.attachmentLinks,
      ...(context.tunables as AirtableTunables | undefined),
    });
  },
  // Webhook pings (TRIBUTARY_PUBLIC_URL set): signed with the webhook's MAC secret.
  inbound: { signed: pingSigned, verify: verifyPing },
  attachments: airtableAttachments,
  // A base may only have 10 webhooks: a deleted sync's goes with it.
  async cleanup(context: CleanupContext) {
    const state = await loadWebhookState(context.target, context.schemas);
    if (!state) return;
    const client = clientForSync(context);
    await removeWebhook(client, state.id);
  },
};
