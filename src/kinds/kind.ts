import type { SyncAttachmentLinks } from '../attachments/links.ts';
import type { Liveness } from '../sync/liveness.ts';
import type pg from 'pg';
import type { z } from 'zod';
import type { CreateSyncInput } from '../control/sync-service.ts';
import type { SyncRecord } from '../control/syncs.ts';
import type { Secret } from '../control/secrets.ts';
import type { CollectionRules } from '../decoder/events.ts';
import type { Runner } from '../lease/worker.ts';
import type { Logger } from '../log.ts';
import type { KindProxy } from '../proxy/plan.ts';
import type { SyncDbMigration } from '../syncdb/migrate.ts';
import type { SyncSchemas } from '../syncdb/schemas.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import type { PassRequests } from '../sync/passes.ts';

/**
 * One upstream Tributary syncs from (Airtable, Stripe, …), as the core sees it. Each kind is a
 * folder that exports one of these; the registry main.ts builds hands them to the parts that
 * need them, which know no upstream by name.
 */
export interface SourceKind {
  /** The `kind` of a sync in the API and the control database. */
  readonly name: string;
  /** The upstream's API host, which TRIBUTARY_UPSTREAMS may point at a fake. */
  readonly upstreamHost: string;
  /**
   * The fields of a create request that are this kind's own, as zod checks them: `api_key`'s
   * shape, and `base_id` when a sync is of one object within the upstream account (Airtable's
   * base). `settings` comes from `settings` below.
   */
  readonly createFields: { api_key: z.ZodTypeAny; base_id?: z.ZodTypeAny };
  /** Every setting with its default; a create or PATCH may give any of them. */
  readonly settings: { schema: z.AnyZodObject; defaults: Record<string, unknown> };
  /**
   * A key names one upstream account (Stripe's do): an account syncs each key once, and the
   * key's digest is kept to find its sync (the proxy). Otherwise one key may serve several syncs.
   */
  readonly keyNamesAccount?: boolean;
  /** What a second sync of the same upstream is called in the 409 (`base app…`, `this Stripe key`). */
  describeUpstream(sync: { baseId: string | null; upstreamAccountId: string | null }): string;
  /** Which tables' changes are events, under which collection, keyed by which column. */
  readonly events: CollectionRules;
  /** A table's upstream name and id for the console, from its name and its COMMENT. */
  describeTable(table: string, comment: string | null): { upstreamName: string | null; upstreamId: string | null };
  /** Checks the key before a sync is made; throws a TributaryError('unprocessable') when it cannot read what the sync needs. */
  check(input: CreateSyncInput, context: KindContext): Promise<UpstreamFacts>;
  /** The kind's own bookkeeping in a sync database, as numbered steps (src/syncdb/migrate.ts). */
  readonly syncDatabaseMigrations?: SyncDbMigration[];
  /** Builds what must exist in a new sync database (in the sync's schemas) before its creation is answered. */
  prepareDatabase?(adminUrl: string, logger: Logger, schemas: SyncSchemas): Promise<void>;
  /**
   * Names what prepareDatabase builds, for the server's template of the kind (control/templates.ts):
   * a new value builds a new template. Setting it also promises that prepareDatabase may run
   * again on a database it prepared, since it runs on each copy too (adding what a stale
   * template lacks). A kind with prepareDatabase and without this is built in place.
   */
  readonly templateVersion?: () => string;
  /**
   * Whether a sync of this kind may live in a schema of another sync's database
   * (`database_of`): true once every table and bookkeeping name it writes comes from its schemas.
   */
  readonly sharesDatabase?: boolean;
  /** The loop that keeps one sync's database in step with its upstream. */
  runner(context: RunnerContext): Runner;
  /** Its part of the write-through proxy; a kind without one is not proxied. */
  readonly proxy?: KindProxy;
  /**
   * Notifications the upstream pushes about a sync (POST /hooks/<kind>/<sync id>,
   * src/api/routes/hooks.ts): whether one is signed with the sync's hook secret. One that is
   * wakes the sync's runner; the runner reads what changed itself.
   */
  readonly inbound?: KindInbound;
  /**
   * Files the upstream serves at URLs that expire (Airtable's attachments), which a sync's
   * setting may replace by stable links (src/attachments/links.ts) that the API redirects.
   */
  readonly attachments?: KindAttachments;
  /** Removes what a deleted sync left upstream (Airtable's webhook); failures are logged by the caller. */
  cleanup?(context: CleanupContext): Promise<void>;
}

export interface KindInbound {
  /**
   * Whether the headers carry a signature of the kind's form (and, where it signs a time, a
   * fresh one): a notification without is refused before its body is read.
   */
  signed(headers: InboundDelivery['headers']): boolean;
  verify(delivery: InboundDelivery): boolean;
  /** What part of the sync has news, by the signed notification (a Stripe connected account): only it is read. */
  partOf?(delivery: InboundDelivery): string | undefined;
  /**
   * What makes a signed notification unique (its timestamp and signature), for upstreams
   * that sign a time: the same one again within the route's window is a replay, refused.
   */
  replayKey?(delivery: InboundDelivery): string | undefined;
}

export interface KindAttachments {
  /** Whether the sync's settings put stable links in its columns (a link of a sync whose settings do not is refused). */
  enabled(settings: unknown): boolean;
  /**
   * The current URLs of the attachments of some records of one table, read from the upstream
   * now (with the client's priority): by record id, then attachment id. A record not there is gone.
   */
  locate(context: AttachmentContext, tableId: string, recordIds: string[]): Promise<Map<string, Map<string, AttachmentUrls>>>;
}

/** An attachment's URL, and its thumbnails' by size name where the upstream makes them. */
export interface AttachmentUrls {
  url: string;
  thumbnails: Record<string, string>;
}

export interface AttachmentContext extends KindContext {
  sync: SyncRecord;
  key: Secret;
}

/** A notification as it arrived, and the hook it claims to come from. */
export interface InboundDelivery {
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** The upstream's id of the sync's hook, and the secret it signs with (as the upstream gave it). */
  hookId: string;
  secret: Secret;
}

/** Where the upstream may notify a sync, and how the runner keeps the hook's secret (RunnerContext.hooks). */
export interface SyncHooks {
  /** The URL to give the upstream: TRIBUTARY_PUBLIC_URL's /hooks/<kind>/<sync id>. */
  url: string;
  /** Kept sealed in the control database, where the API reads it to check each notification. */
  save(hookId: string, secret: string): Promise<void>;
}

/** What a kind learnt about the upstream while checking the key. */
export interface UpstreamFacts {
  upstreamAccountId?: string;
  upstreamName?: string;
  warnings?: string[];
}

/** The service's parts a kind may use. */
export interface KindContext {
  /** The upstream's base URL (https://api.… or a fake's). */
  baseUrl: string;
  limiter?: QuotaLimiter;
  logger: Logger;
  /** The control database, where a kind keeps what it learns of a key for every process (Airtable: its user). */
  control?: pg.Pool;
}

export interface CleanupContext extends KindContext {
  sync: SyncRecord;
  /** The sync's own database. */
  target: pg.Pool;
  /** Where the sync's tables and bookkeeping are in it (src/syncdb/schemas.ts). */
  schemas: SyncSchemas;
  key: Secret;
  /** Where the sync's inbound deliveries were sent, when the service has a public URL: what it may have registered upstream. */
  hookUrl?: string;
}

export interface RunnerContext extends KindContext {
  sync: SyncRecord;
  /** The control database (status) and the sync's own database (data). */
  control: pg.Pool;
  target: pg.Pool;
  /** Where the sync's tables and bookkeeping are in it: `public` and `public_swap` unless it shares another sync's database. */
  schemas: SyncSchemas;
  key: Secret;
  /** The sync's settings as they are now (a PATCH applies from the next cycle). */
  loadSettings(): Promise<unknown>;
  /** Wait requests for this sync, which start the next pass early. */
  passRequests?: PassRequests;
  /** Told of every 429 the upstream answers the sync, with what it means for the sync in words (its status shows them). */
  onRateLimited(note: string): void;
  /** The kind's own tunables (tests and benchmarks), as `tunables[kind]` gives them. */
  tunables?: unknown;
  /** Notifications from the upstream, when the service has a public URL (kinds with `inbound`). */
  hooks?: SyncHooks;
  /** The sync's stable attachment links, given to kinds with `attachments` (the sync's settings say whether its columns hold them). */
  attachmentLinks?: SyncAttachmentLinks;
  /** Told of every status the runner reports (its StatusReporter's option): a runner silent past its bound is restarted. */
  liveness?: Liveness;
}

/** What a field a kind's settings do not have is told: the settings it has. */
export const settingsOnly = (kind: SourceKind): string =>
  `not a setting of ${kind.name} syncs (their settings: ${Object.keys(kind.settings.schema.shape).join(', ')})`;
