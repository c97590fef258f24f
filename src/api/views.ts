import { walBoundWarning } from '../control/server-checks.ts';
import type { Account } from '../control/accounts.ts';
import type { Secret } from '../control/secrets.ts';
import { type StatusBounds, statusOf } from '../control/status.ts';
import type { SlotGap } from '../control/status-fields.ts';
import { freeOf, type ServerRecord } from '../control/servers.ts';
import type { SyncRecord } from '../control/syncs.ts';
import type { SourceKind } from '../kinds/kind.ts';
import type { SourceKinds } from '../kinds/registry.ts';
import { driftAnswer, driftView } from './drift-view.ts';
import { z } from './zod.ts';

/**
 * The answers' shapes, as zod schemas: the OpenAPI document is generated from them, the view
 * functions below are typed by them, and the OpenAPI test checks real answers against them.
 * Answers are strict (no other fields), so a field added to a view without its schema shows.
 * A schema gets its component name (`.openapi(name)`) last: zod copies the name into schemas
 * derived from a named one (`.extend`, `.partial`), which would then all claim it.
 */

/** Where users reach the event stream; the same for every sync of a deployment. */
export interface EventEndpoints {
  restUrl: string;
  kafkaBrokers: string[];
}

export const time = z.string().datetime();

const INSTANT_FORM = 'must be an ISO 8601 time with a zone, such as 2024-05-01T12:00:00Z';
/**
 * A time a client gives: ISO 8601 with a zone, one that names a real instant. The form alone
 * lets through zones no clock has (`+24:00`, `+99:99`), which would reach SQL as NaN.
 */
export const instantInput = z
  .string({ errorMap: () => ({ message: INSTANT_FORM }) })
  .datetime({ offset: true, message: INSTANT_FORM })
  .refine((text) => Number.isFinite(Date.parse(text)), 'must be a real time: a zone is at most 23:59 from UTC');
const eventEndpoints = {
  rest_url: z.string().describe('`{rest_url}`: the event REST interface (Upstash Kafka REST shapes)'),
  kafka_brokers: z.array(z.string()).describe('Kafka bootstrap brokers; empty when the deployment runs without Kafka'),
};

const accountFields = {
  id: z.string().describe('`acc_…`'),
  name: z.string(),
  created_at: time,
};

export const accountAnswer = z.object(accountFields).strict().openapi('Account');

export const accountLimitsAnswer = z
  .object({
    ...accountFields,
    limits: z
      .object({
        max_syncs: z.number().int().describe('Syncs the account may have'),
        reader_connection_budget: z.number().int().describe("Connections all the account's read-only roles may hold together"),
        max_consumer_groups: z.number().int().describe('Consumer groups of the event REST interface the account may keep'),
        max_group_members: z.number().int().describe('Live instances per consumer group'),
        max_webhooks: z.number().int().describe("Webhooks of all the account's syncs together"),
      })
      .strict(),
  })
  .strict()
  .openapi('AccountWithLimits');

export const newAccountAnswer = z
  .object({
    ...accountFields,
    api_token: z.string().describe("The account's bearer token (`trb_…`); shown in this answer only"),
    events: z
      .object({
        username: z.string().describe('Event credentials: Kafka SASL/SCRAM and REST basic auth'),
        password: z.string().describe('Shown in this answer only (and in the console on request)'),
        ...eventEndpoints,
      })
      .strict(),
  })
  .strict()
  .openapi('NewAccount');

export function accountView(account: Account): z.infer<typeof accountAnswer> {
  return { id: account.id, name: account.name, created_at: account.createdAt.toISOString() };
}

/** An account with the operator's limits (the answer to changing them). */
export function accountLimitsView(account: Account): z.infer<typeof accountLimitsAnswer> {
  return {
    ...accountView(account),
    limits: {
      max_syncs: account.maxSyncs,
      reader_connection_budget: account.readerConnectionBudget,
      max_consumer_groups: account.maxConsumerGroups,
      max_group_members: account.maxGroupMembers,
      max_webhooks: account.maxWebhooks,
    },
  };
}

/** The one answer that carries the account's token and event password. */
export function newAccountView(account: Account, apiToken: Secret, eventsPassword: Secret, events: EventEndpoints): z.infer<typeof newAccountAnswer> {
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

export const serverAnswer = z
  .object({
    id: z.string().describe('`srv_…`'),
    region: z.string(),
    capacity: z.number().int().describe('Syncs it may hold'),
    syncs: z.number().int().describe('Syncs it holds'),
    free: z.number().int().describe('Syncs it may still take: capacity minus syncs, never below 0'),
    draining: z.boolean().describe('A draining server keeps its syncs and gets no new ones'),
    configured: z
      .boolean()
      .describe("The server the service's configuration names (`TRIBUTARY_TARGET_DATABASE_URL`, else the control database's): the first member"),
    max_slot_wal_keep_size_mb: z
      .number()
      .int()
      .nullable()
      .describe(
        'Its `max_slot_wal_keep_size` in MB as last read (when it was added or changed, and at each start of the service): the most WAL its replication slots may keep; -1 is no bound; null when not read yet',
      ),
    free_disk_bytes: z
      .number()
      .nullable()
      .describe('Free space of the disk its data lives on, read every minute where the service can (the embedded server it started); null elsewhere'),
    warnings: z.array(z.string()).describe('What the operator should know of it: a server with no bound on the WAL its slots keep'),
    created_at: time,
  })
  .strict()
  .openapi('Server', { description: 'A server of the pool that holds sync databases. Its URL is never shown' });

export function serverView(server: ServerRecord): z.infer<typeof serverAnswer> {
  return {
    id: server.id,
    region: server.region,
    capacity: server.capacity,
    syncs: server.syncs,
    free: freeOf(server),
    draining: server.draining,
    configured: server.configured,
    max_slot_wal_keep_size_mb: server.slotWalKeepMb,
    free_disk_bytes: server.freeDiskBytes,
    warnings: [walBoundWarning(server.slotWalKeepMb)].filter((w): w is string => w !== undefined),
    created_at: server.createdAt.toISOString(),
  };
}

/** `AirtableSettings` for the kind `airtable`: a component name from the kind's own name. */
export const kindComponent = (kind: SourceKind, suffix: string) =>
  `${kind.name.replace(/(^|[^A-Za-z0-9]+)([A-Za-z0-9])/g, (_, _sep: string, c: string) => c.toUpperCase())}${suffix}`;

/** One schema, or the union of several (zod's union needs two at least). */
export function oneOf<T extends z.ZodTypeAny>(schemas: T[]): T | z.ZodUnion<[T, T, ...T[]]> {
  if (schemas.length === 0) throw new Error('oneOf needs a schema');
  return schemas.length === 1 ? schemas[0]! : z.union(schemas as [T, T, ...T[]]);
}

export const syncStatusAnswer = z
  .object({
    indicator: z.enum(['normal', 'yellow', 'red']),
    reason: z.string().describe('Why the indicator is what it is, in words'),
    started_at: time.nullable().describe('When the latest cycle began'),
    completed_at: time.nullable().describe('When the latest cycle completed'),
    duration_last: z.number().nullable().describe('Seconds the latest completed cycle took'),
    lag_seconds: z.number().nullable().describe('Age of the oldest data the database may still show'),
    events_lag_seconds: z
      .number()
      .nullable()
      .describe('Age of the oldest committed change that may not be an event yet: 0 while the event log is caught up; null before the decoder first reported'),
    deliveries_lag_seconds: z
      .number()
      .nullable()
      .describe(
        'Age of the oldest logged event that a delivery path (the Kafka relay, an enabled webhook) has not delivered yet: 0 when every path has delivered everything',
      ),
    deliveries_behind: z.string().nullable().describe('The delivery path furthest behind (`kafka` or `webhook <id>`), while one is behind; null otherwise'),
    last_error: z.string().nullable(),
    progress: z
      .unknown()
      .describe(
        "The running pass's progress, in the kind's own terms (Stripe with connected accounts: also accounts_done, accounts_total and accounts_objects, kept between passes); null when there is none",
      ),
    slowed_by: z
      .string()
      .nullable()
      .describe(
        "An upstream limit shared with other syncs that held this sync back within the last minute, in words (Airtable: all of one user's tokens share 50 requests a second across bases); null when none",
      ),
    paced_cycle_s: z
      .number()
      .int()
      .nullable()
      .describe(
        'Airtable: while change capture is healthy and the latest cycle found nothing it had missed, each cycle is spread over about this many seconds (the sweep then only catches what change capture cannot see); null: the sweep runs at the full pace of its quota',
      ),
    incomplete: z
      .array(
        z
          .object({
            list: z.string().describe("The upstream's list (Stripe: its path, `#parent table` for a list read under each parent)"),
            table: z.string().describe('The table it fills'),
            reason: z
              .string()
              .describe('Why it is incomplete, in words: a rate limit being waited out, an upstream error with its status, a missing permission'),
            since: time.describe('Since when'),
          })
          .strict(),
      )
      .describe('Lists the sync cannot read completely right now, and why; each is gone once its next read succeeds. Empty when every list is complete'),
  })
  .strict()
  .openapi('SyncStatus');

/** A sync's answer: `kind` and `settings` are those of the kinds this service syncs. */
export function syncAnswer(kinds: SourceKinds) {
  const all = kinds.names().map((name) => kinds.get(name));
  return z
    .object({
      id: z.string().describe('`syn_…`'),
      kind: z.enum(all.map((kind) => kind.name) as [string, ...string[]]),
      name: z.string().nullable().describe("The synced upstream's own name, once known"),
      account_id: z.string(),
      base_id: z.string().optional().describe('The upstream object synced, for kinds that sync one object of an upstream account'),
      settings: oneOf(all.map((kind) => kind.settings.schema.openapi(kindComponent(kind, 'Settings')))).describe("Every setting of the sync's kind"),
      database: z
        .object({
          name: z.string().describe('`tr_` and 16 lowercase letters and digits'),
          url: z.string().describe("Connects as the sync's read-only role"),
          connection_limit: z.number().int().describe("The read-only role's connection limit"),
          statement_timeout_ms: z.number().int().describe("The read-only role's statement_timeout (0: none)"),
          idle_in_transaction_timeout_ms: z.number().int().describe("The read-only role's idle_in_transaction_session_timeout (0: none)"),
          temp_file_limit_mb: z.number().int().describe("The read-only role's temp_file_limit, per server process"),
          region: z.string().nullable().describe('The region of the pool server that holds the database; null on a customer-owned server (`database_url`)'),
          schema: z
            .string()
            .describe("The schema of the sync's tables and `_sync_meta`: `public`, or its own in a database it shares (set `search_path` to it)"),
          database_of: z
            .string()
            .nullable()
            .describe("The sync whose database this one shares (its reader, role limits and server are that sync's); null when the sync made its own"),
        })
        .strict(),
      events: z
        .object({
          topic_prefix: z.string().describe('`svc.<sync id>.`: topics are this and a collection'),
          ...eventEndpoints,
          logged: z.number().int().describe('Events made durable so far'),
          slot_lag_bytes: z.number().nullable().describe("WAL bytes the sync's replication slot is behind the server"),
          slot_retained_bytes: z
            .number()
            .nullable()
            .describe("WAL bytes the server keeps for the sync's slot (from its restart_lsn); null before the decoder's first report"),
          slot_safe_bytes: z
            .number()
            .nullable()
            .describe('WAL bytes that may still be written before the server drops WAL the slot needs (`max_slot_wal_keep_size`); null when it has no bound'),
          slot_wal_status: z
            .string()
            .nullable()
            .describe("pg_replication_slots' `wal_status`: `reserved`, `extended`, `unreserved` (the next checkpoint may drop WAL it needs) or `lost`"),
          slot_gap: z
            .object({
              id: z.string().describe("The gap marker's `id` (and `data.gap`) in the stream"),
              reason: z
                .enum(['invalidated', 'missing'])
                .describe('`invalidated`: PostgreSQL dropped WAL the slot needed, or invalidated it otherwise; `missing`: the slot was gone'),
              detail: z.string().describe('What was found, in words'),
              lost_at: time.describe('When the decoder noticed the loss'),
              recovered_at: time.nullable().describe('When the new slot was made; null: not yet'),
              backfill: z.string().describe('The backfill (reason `slot_lost`) that reads every collection again after the marker'),
              backfill_state: z.enum(['running', 'done', 'canceled', 'failed']).nullable().describe('Its state; null: not started yet'),
              reread_at: time.nullable().describe('When the re-read finished'),
            })
            .strict()
            .nullable()
            .describe(
              'The latest lost replication slot of the sync, replaced with a gap marked in the stream (docs/events.md#gaps-a-lost-replication-slot); null: none',
            ),
        })
        .strict(),
      status: syncStatusAnswer,
      drift: driftAnswer,
      warnings: z
        .array(z.string())
        .describe(
          'What the key cannot read (those objects are skipped): found when the sync was created, then kept up to date by the sync; a warning is gone once its list can be read',
        ),
      created_at: time,
    })
    .strict()
    .openapi('Sync');
}

export type SyncAnswer = z.infer<ReturnType<typeof syncAnswer>>;

function gapView(gap: SlotGap | null | undefined): SyncAnswer['events']['slot_gap'] {
  if (!gap) return null;
  return {
    id: gap.id,
    reason: gap.reason as 'invalidated' | 'missing',
    detail: gap.detail,
    lost_at: gap.lostAt.toISOString(),
    recovered_at: gap.recoveredAt?.toISOString() ?? null,
    backfill: gap.backfillId,
    backfill_state: gap.backfillState as 'running' | 'done' | 'canceled' | 'failed' | null,
    reread_at: gap.rereadAt?.toISOString() ?? null,
  };
}

/** `reader`: the sync whose reader role serves it (itself, or the one whose database it shares). */
export function syncView(sync: SyncRecord, readerUrl: string, events: EventEndpoints, reader: SyncRecord = sync, bounds?: Partial<StatusBounds>): SyncAnswer {
  return {
    id: sync.id,
    kind: sync.kind,
    name: sync.upstreamName,
    account_id: sync.accountId,
    ...(sync.baseId !== null ? { base_id: sync.baseId } : {}),
    settings: sync.settings,
    database: {
      name: sync.databaseName,
      url: readerUrl,
      connection_limit: reader.readerConnectionLimit,
      statement_timeout_ms: reader.readerLimits.statementTimeoutMs,
      idle_in_transaction_timeout_ms: reader.readerLimits.idleInTransactionTimeoutMs,
      temp_file_limit_mb: reader.readerLimits.tempFileLimitMb,
      region: sync.region,
      schema: sync.schema,
      database_of: sync.databaseOf,
    },
    events: {
      topic_prefix: `svc.${sync.id}.`,
      rest_url: events.restUrl,
      kafka_brokers: events.kafkaBrokers,
      logged: sync.decoder.eventsLogged,
      slot_lag_bytes: sync.decoder.slotLagBytes,
      slot_retained_bytes: sync.status.events?.slot?.retainedBytes ?? null,
      slot_safe_bytes: sync.status.events?.slot?.safeBytes ?? null,
      slot_wal_status: sync.status.events?.slot?.walStatus ?? null,
      slot_gap: gapView(sync.status.slotGap),
    },
    status: statusOf(sync.status, new Date(), bounds),
    drift: driftView(sync.status.drift),
    warnings: sync.warnings,
    created_at: sync.createdAt.toISOString(),
  };
}
