import type pg from 'pg';
import type { SyncHooks } from '../kinds/kind.ts';
import type { Logger } from '../log.ts';
import { AirtableError, type AirtableClient } from './client.ts';
import { loadState, saveState } from '../sync/state.ts';
import type { SyncSchemas } from '../syncdb/schemas.ts';

/** What the sync keeps of its Airtable webhook, in `_state` of its swap schema. */
export interface WebhookState {
  id: string;
  cursor: number;
  expirationTime: string | null;
  /** When it was created or last refreshed (ms): with the expiry, its lifetime. */
  refreshedAt?: number;
  /** Where Airtable pings when it has payloads (our /hooks route), if anywhere. */
  notificationUrl?: string;
  /** Airtable's last ping to it failed, as the webhook list said when the cycle last looked. */
  notificationFailing?: boolean;
}

export interface WebhookPayload {
  timestamp: string;
  changedTablesById?: Record<
    string,
    {
      createdRecordsById?: Record<string, unknown>;
      changedRecordsById?: Record<string, unknown>;
      destroyedRecordIds?: string[];
      createdFieldsById?: Record<string, unknown>;
      changedFieldsById?: Record<string, unknown>;
      destroyedFieldIds?: string[];
      changedMetadata?: unknown;
    }
  >;
  createdTablesById?: Record<string, unknown>;
  destroyedTableIds?: string[];
}

const STATE_KEY = 'airtable_webhook';
/** Webhooks live 7 days; refreshing a day ahead leaves room for a long outage. */
const REFRESH_AHEAD_MS = 24 * 3600_000;

/** Due for a refresh: within a day of expiry, or past half its lifetime (short-lived ones). */
export function needsRefresh(state: WebhookState, now = Date.now()): boolean {
  if (!state.expirationTime) return false;
  const expires = Date.parse(state.expirationTime);
  const lifetime = expires - (state.refreshedAt ?? expires - 2 * REFRESH_AHEAD_MS);
  return expires - now < Math.min(REFRESH_AHEAD_MS, lifetime / 2);
}

/** Extends the webhook's life; its cursor and payloads stay. */
export async function refreshWebhook(client: AirtableClient, db: pg.Pool, schemas: SyncSchemas, state: WebhookState): Promise<WebhookState> {
  const refreshed = await client.request<{ expirationTime: string | null }>('POST', `/v0/bases/${client.baseId}/webhooks/${state.id}/refresh`);
  const next = { ...state, expirationTime: refreshed.expirationTime, refreshedAt: Date.now() };
  await saveWebhookState(db, schemas, next);
  return next;
}

export const loadWebhookState = (db: pg.Pool, schemas: SyncSchemas): Promise<WebhookState | undefined> => loadState<WebhookState>(db, schemas, STATE_KEY);

export const saveWebhookState = (db: pg.Pool, schemas: SyncSchemas, state: WebhookState): Promise<void> => saveState(db, schemas, STATE_KEY, state);

interface WebhookInfo {
  id: string;
  expirationTime?: string | null;
  isHookEnabled?: boolean;
  areNotificationsEnabled?: boolean;
  lastNotificationResult?: { success?: boolean } | null;
}

/**
 * Makes sure the base has our webhook and that it will not expire soon. Returns its
 * state, or undefined when the key may not manage webhooks (the sweep then carries
 * every change alone). A new webhook starts at cursor 1: it must exist before the
 * sweep that follows starts, so nothing between the two is missed.
 *
 * With `hooks` (the service has a public URL) the webhook pings our /hooks route when it has
 * payloads; one made without that URL, or with another, is replaced (Airtable cannot change
 * it). Whether the pings arrive is taken from Airtable's own account of its last one.
 */
export async function ensureWebhook(
  client: AirtableClient,
  db: pg.Pool,
  schemas: SyncSchemas,
  logger: Logger,
  hooks?: SyncHooks,
): Promise<WebhookState | undefined> {
  const base = client.baseId;
  let state = await loadWebhookState(db, schemas);
  try {
    if (state) {
      const { webhooks } = await client.request<{ webhooks: WebhookInfo[] }>('GET', `/v0/bases/${base}/webhooks`);
      const live = webhooks.find((w) => w.id === state!.id);
      const expired = !live || (live.expirationTime && Date.parse(live.expirationTime) <= Date.now());
      if (expired) {
        logger.warn({ webhook: state.id }, 'Airtable webhook expired or vanished; changes since are caught by the sweep');
        state = undefined;
      } else if (state.notificationUrl !== hooks?.url) {
        // The sweep that follows covers what the old one saw and nobody read.
        logger.info({ webhook: state.id, notification_url: hooks?.url ?? null }, 'Airtable webhook replaced: its notification URL changed');
        await removeWebhook(client, state.id);
        state = undefined;
      } else {
        if (needsRefresh({ ...state, expirationTime: live.expirationTime ?? null })) state = await refreshWebhook(client, db, schemas, state);
        state = await checkNotifications(client, db, schemas, logger, state, live);
      }
    }
    if (!state) {
      const created = await client.request<{ id: string; macSecretBase64: string; expirationTime: string | null }>('POST', `/v0/bases/${base}/webhooks`, {
        ...(hooks ? { notificationUrl: hooks.url } : {}),
        specification: { options: { filters: { dataTypes: ['tableData', 'tableFields'] } } },
      });
      // Known to the /hooks route before the first ping can come.
      if (hooks) await hooks.save(created.id, created.macSecretBase64);
      state = { id: created.id, cursor: 1, expirationTime: created.expirationTime, refreshedAt: Date.now(), ...(hooks ? { notificationUrl: hooks.url } : {}) };
      await saveWebhookState(db, schemas, state);
      logger.info({ webhook: created.id, notification_url: hooks?.url ?? null }, 'Airtable webhook created for change capture');
    }
    return state;
  } catch (error) {
    if (error instanceof AirtableError && (error.kind === 'auth' || error.kind === 'invalid')) {
      logger.warn({ error: error.message }, 'cannot manage Airtable webhooks with this key; changes arrive with each sweep only');
      return undefined;
    }
    throw error;
  }
}

/**
 * Whether the webhook's pings reach us, as Airtable last saw it: a failed one puts change
 * capture back to polling every second (capture.ts) until one succeeds. Notifications Airtable
 * turned off after failing for long are turned on again.
 */
async function checkNotifications(
  client: AirtableClient,
  db: pg.Pool,
  schemas: SyncSchemas,
  logger: Logger,
  state: WebhookState,
  live: WebhookInfo,
): Promise<WebhookState> {
  if (!state.notificationUrl) return state;
  if (live.areNotificationsEnabled === false) {
    await client.request('POST', `/v0/bases/${client.baseId}/webhooks/${state.id}/enableNotifications`, { enable: true });
  }
  const failing = live.lastNotificationResult?.success === false || live.areNotificationsEnabled === false;
  if (failing === (state.notificationFailing ?? false)) return state;
  if (failing)
    logger.warn({ notification_url: state.notificationUrl }, "Airtable's pings do not reach this service; change capture polls every second meanwhile");
  else logger.info({ notification_url: state.notificationUrl }, "Airtable's pings reach this service again");
  const next = { ...state, notificationFailing: failing };
  await saveWebhookState(db, schemas, next);
  return next;
}

export async function removeWebhook(client: AirtableClient, webhookId: string): Promise<void> {
  try {
    await client.request('DELETE', `/v0/bases/${client.baseId}/webhooks/${webhookId}`);
  } catch (error) {
    if (!(error instanceof AirtableError && (error.status === 404 || error.kind === 'auth'))) throw error;
  }
}

/** Pages of payloads one read takes at most (50 payloads each): a long backlog is read in several. */
const PAGES_PER_READ = 20;

/**
 * Payloads after the cursor, up to PAGES_PER_READ pages; `more` when Airtable had more ready
 * than that, to be read before the database can be said to hold what was there.
 */
export async function readPayloads(client: AirtableClient, state: WebhookState): Promise<{ payloads: WebhookPayload[]; cursor: number; more: boolean }> {
  const payloads: WebhookPayload[] = [];
  let cursor = state.cursor;
  let more = false;
  for (let page = 0; page < PAGES_PER_READ; page++) {
    const answer = await client.request<{ payloads: WebhookPayload[]; cursor: number; mightHaveMore: boolean }>(
      'GET',
      `/v0/bases/${client.baseId}/webhooks/${state.id}/payloads?cursor=${cursor}&limit=50`,
    );
    payloads.push(...answer.payloads);
    cursor = answer.cursor;
    more = answer.mightHaveMore;
    if (!more) break;
  }
  return { payloads, cursor, more };
}
