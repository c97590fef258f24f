import type { Account } from '../control/accounts.ts';
import type { Secret } from '../control/secrets.ts';
import { statusOf } from '../control/status.ts';
import type { SyncRecord } from '../control/syncs.ts';

/** Where users reach the event stream; the same for every sync of a deployment. */
export interface EventEndpoints {
  restUrl: string;
  kafkaBrokers: string[];
}

export function accountView(account: Account) {
  return { id: account.id, name: account.name, created_at: account.createdAt.toISOString() };
}

/** An account with the operator's limits (the answer to changing them). */
export function accountLimitsView(account: Account) {
  return { ...accountView(account), limits: { max_syncs: account.maxSyncs, reader_connection_budget: account.readerConnectionBudget } };
}

/** The one answer that carries the account's token and event password. */
export function newAccountView(account: Account, apiToken: Secret, eventsPassword: Secret, events: EventEndpoints) {
  return {
    ...accountView(account),
    api_token: apiToken.reveal(),
    events: {
      username: account.eventsUsername,
      password: eventsPassword.reveal(),
      rest_url: events.restUrl,
      kafka_brokers: events.kafkaBrokers,
    },
  };
}

export function syncView(sync: SyncRecord, readerUrl: string, events: EventEndpoints) {
  return {
    id: sync.id,
    kind: sync.kind,
    /** The base's or Stripe account's name upstream, as the console lists it. */
    name: sync.upstreamName,
    account_id: sync.accountId,
    ...(sync.baseId !== null ? { base_id: sync.baseId } : {}),
    settings: sync.settings,
    database: { name: sync.databaseName, url: readerUrl, connection_limit: sync.readerConnectionLimit },
    events: {
      topic_prefix: `svc.${sync.id}.`,
      rest_url: events.restUrl,
      kafka_brokers: events.kafkaBrokers,
      /** Events the decoder has made durable so far, and how far (WAL bytes) its slot is behind the server. */
      logged: sync.decoder.eventsLogged,
      slot_lag_bytes: sync.decoder.slotLagBytes,
    },
    status: statusOf(sync.status),
    /** What the key cannot read, found when the sync was created (those objects are skipped). */
    warnings: sync.warnings,
    created_at: sync.createdAt.toISOString(),
  };
}
