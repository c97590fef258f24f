import type pg from 'pg';
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
}

/**
 * Makes sure the base has our webhook and that it will not expire soon. Returns its
 * state, or undefined when the key may not manage webhooks (the sweep then carries
 * every change alone). A new webhook starts at cursor 1: it must exist before the
 * sweep that follows starts, so nothing between the two is missed.
 */
export async function ensureWebhook(client: AirtableClient, db: pg.Pool, schemas: SyncSchemas, logger: Logger): Promise<WebhookState | undefined> {
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
      } else if (needsRefresh({ ...state, expirationTime: live.expirationTime ?? null })) {
        state = await refreshWebhook(client, db, schemas, state);
      }
    }
    if (!state) {
      const created = await client.request<{ id: string; expirationTime: string | null }>('POST', `/v0/bases/${base}/webhooks`, {
        specification: { options: { filters: { dataTypes: ['tableData', 'tableFields'] } } },
      });
      state = { id: created.id, cursor: 1, expirationTime: created.expirationTime, refreshedAt: Date.now() };
      await saveWebhookState(db, schemas, state);
      logger.info({ webhook: created.id }, 'Airtable webhook created for change capture');
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

export async function removeWebhook(client: AirtableClient, webhookId: string): Promise<void> {
  try {
    await client.request('DELETE', `/v0/bases/${client.baseId}/webhooks/${webhookId}`);
  } catch (error) {
    if (!(error instanceof AirtableError && (error.status === 404 || error.kind === 'auth'))) throw error;
  }
}

/** Payloads after the cursor, as many pages as Airtable has ready. */
export async function readPayloads(client: AirtableClient, state: WebhookState): Promise<{ payloads: WebhookPayload[]; cursor: number }> {
  const payloads: WebhookPayload[] = [];
  let cursor = state.cursor;
  for (let page = 0; page < 20; page++) {
    const answer = await client.request<{ payloads: WebhookPayload[]; cursor: number; mightHaveMore: boolean }>(
      'GET',
      `/v0/bases/${client.baseId}/webhooks/${state.id}/payloads?cursor=${cursor}&limit=50`,
    );
    payloads.push(...answer.payloads);
    cursor = answer.cursor;
    if (!answer.mightHaveMore) break;
  }
  return { payloads, cursor };
}
