import path from 'node:path';
import { type BackfillLimits, DEFAULT_BACKFILL_LIMITS } from './backfill/limits.ts';
import { DEFAULT_CREDENTIAL_LIMITS, type CredentialLimits } from './credentials/throttle.ts';
import { DEFAULT_DELIVERY_BOUNDS, type DeliveryBounds } from './events/webhooks/shared-bounds.ts';
import { DEFAULT_MAX_SYNCS } from './lease/worker.ts';
import { DEFAULT_TENANT_LIMITS, type TenantLimits } from './tenancy/limits.ts';

/** Every process role Tributary knows; `tributary run --roles` picks a subset. */
export const allRoles = ['api', 'sync', 'decoder', 'proxy', 'events'] as const;
export type Role = (typeof allRoles)[number];

export interface Config {
  host: string;
  /** Host name put into URLs handed to users (database.url, rest_url). */
  publicHost: string;
  /** True when TRIBUTARY_PUBLIC_HOST was set: then it also replaces the shared server's host in database URLs. */
  publicHostSet: boolean;
  /**
   * The origin browsers reach the API and console at, when it is not the server's own
   * (TRIBUTARY_PUBLIC_URL, e.g. https behind a reverse proxy): the console's same-origin
   * checks, its cookie's Secure flag and the URLs it hands out follow it.
   */
  publicOrigin: string | undefined;
  apiPort: number;
  proxyPort: number;
  eventsPort: number;
  /** Folder for the embedded PostgreSQL, the generated secret key and admin token. */
  dataDir: string;
  /** Control database; unset means "start the embedded PostgreSQL". */
  databaseUrl: string | undefined;
  /** Admin connection to the server that holds per-sync databases; defaults to the control server. */
  targetDatabaseUrl: string | undefined;
  /**
   * The region a new sync goes to when it names none (TRIBUTARY_DEFAULT_REGION, default
   * us-west-2), and the region the configured server gets when it joins the pool.
   */
  defaultRegion: string;
  /**
   * Kinds of sync behind a waiting list (TRIBUTARY_WAITING_LIST_KINDS, comma-separated, e.g.
   * `airtable` for the closed beta; default none: every kind is open, as a self-hosted install expects).
   */
  waitingListKinds: string[];
  embeddedPgPort: number;
  /** Private memory each process of the embedded PostgreSQL may hold, in MB (TRIBUTARY_PG_PROCESS_MEMORY_MB); unset: embedded.ts's default. */
  embeddedPgProcessMemoryMb: number | undefined;
  /** max_slot_wal_keep_size of the embedded PostgreSQL, in MB (TRIBUTARY_PG_MAX_SLOT_WAL_KEEP_MB); unset: embedded.ts's default. */
  embeddedPgSlotWalKeepMb: number | undefined;
  kafkaBrokers: string[];
  secretKeyBase64: string | undefined;
  adminToken: string | undefined;
  webhookAllowPrivate: boolean;
  /** TRIBUTARY_DATABASE_ALLOW_PRIVATE=1: a sync's database_url may name a loopback or private server. */
  databaseAllowPrivate: boolean;
  /** How long the event log keeps events (TRIBUTARY_EVENT_RETENTION_HOURS, default 7 days). */
  eventRetentionMs: number;
  /** Partitions of each new event topic (TRIBUTARY_EVENT_PARTITIONS, default 1). */
  eventPartitions: number;
  /**
   * Failed credential checks allowed a minute per client address and per named account
   * (TRIBUTARY_AUTH_FAILURES_PER_SOURCE, default 10; TRIBUTARY_AUTH_FAILURES_PER_ACCOUNT, default 30).
   */
  failedCredentials: CredentialLimits;
  /**
   * Reverse proxies in front of the API and event ports (TRIBUTARY_REVERSE_PROXIES, default 0):
   * when set, the client address is read from X-Forwarded-For, which is never trusted otherwise.
   */
  reverseProxies: number;
  /** How long a consumer group with no instance is kept after its last consume or commit (TRIBUTARY_CONSUMER_GROUP_RETENTION_HOURS, default 7 days). */
  consumerGroupRetentionMs: number;
  /** Exhausted deliveries kept per webhook; the oldest past it are dropped (TRIBUTARY_WEBHOOK_MAX_EXHAUSTED, default 10,000). */
  webhookMaxExhausted: number;
  /** A webhook whose every attempt has failed this long is disabled (TRIBUTARY_WEBHOOK_DISABLE_AFTER_HOURS, default 120: 5 days). */
  webhookDisableAfterMs: number;
  /**
   * Webhook attempts a second per process, across webhooks: to one destination host, of one
   * account (TRIBUTARY_WEBHOOK_MAX_PER_HOST_PER_SECOND, default 1,000;
   * TRIBUTARY_WEBHOOK_MAX_PER_ACCOUNT_PER_SECOND, default 2,000).
   */
  webhookBounds: DeliveryBounds;
  /** What one account's backfills may do (TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT, TRIBUTARY_BACKFILL_ROWS_PER_*_PER_ACCOUNT). */
  backfillLimits: BackfillLimits;
  /** Upstream host -> base URL overrides, e.g. api.airtable.com -> http://127.0.0.1:9101. */
  upstreams: Map<string, string>;
  roles: Role[];
  /** What one account may have going at once in one process (TRIBUTARY_MAX_*_PER_ACCOUNT). */
  tenantLimits: TenantLimits;
  /** Syncs (and, apart, decoders) one process runs at most (TRIBUTARY_MAX_SYNCS_PER_PROCESS, default 1,000). */
  maxSyncsPerProcess: number;
}

type Env = Record<string, string | undefined>;

function port(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) {
    throw new Error(`${name} must be a port number (0-65535), got ${JSON.stringify(raw)}`);
  }
  return value;
}

function origin(env: Env, name: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || (url.pathname !== '/' && url.pathname !== '')) {
    throw new Error(`${name} must be an http:// or https:// URL without a path, got ${JSON.stringify(raw)}`);
  }
  return url.origin;
}

/** A region's name: lower-case letters, digits and hyphens, as cloud regions are named. */
export const REGION_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Kind names, comma-separated: lower-case letters, digits and hyphens each. */
function kindList(env: Env, name: string): string[] {
  const kinds = (env[name] ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  for (const kind of kinds) if (!/^[a-z][a-z0-9-]{0,62}$/.test(kind)) throw new Error(`${name}: "${kind}" is not a kind of sync (e.g. airtable)`);
  return [...new Set(kinds)];
}

function region(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!REGION_PATTERN.test(raw)) {
    throw new Error(`${name} must be lower-case letters, digits and hyphens (up to 63, like us-west-2), got ${JSON.stringify(raw)}`);
  }
  return raw;
}

function positive(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number of at least 1, got ${JSON.stringify(raw)}`);
  return value;
}

function count(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number of at least 0, got ${JSON.stringify(raw)}`);
  return value;
}

export function parseUpstreams(raw: string | undefined): Map<string, string> {
  const map = new Map<string, string>();
  if (!raw) return map;
  for (const pair of raw.split(',')) {
    const trimmed = pair.trim();
    if (!trimmed) continue;
    const eq = trimmed.indexOf('=');
    const host = trimmed.slice(0, eq).trim();
    const target = trimmed.slice(eq + 1).trim();
    if (eq <= 0 || !/^https?:\/\/[^/]+\/?$/.test(target)) {
      throw new Error(`TRIBUTARY_UPSTREAMS: expected host=http(s)://host:port pairs, got ${JSON.stringify(trimmed)}`);
    }
    map.set(host, target.replace(/\/$/, ''));
  }
  return map;
}

export function parseRoles(raw: string | undefined): Role[] {
  if (!raw) return [...allRoles];
  const roles = raw
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  for (const role of roles) {
    if (!(allRoles as readonly string[]).includes(role)) {
      throw new Error(`unknown role ${JSON.stringify(role)}; roles are ${allRoles.join(', ')}`);
    }
  }
  if (roles.length === 0) throw new Error('--roles needs at least one role');
  return [...new Set(roles)] as Role[];
}

export function loadConfig(env: Env = process.env, overrides: Partial<Config> = {}): Config {
  const host = env.TRIBUTARY_HOST || '127.0.0.1';
  const wildcard = host === '0.0.0.0' || host === '::';
  return {
    host,
    publicHost: env.TRIBUTARY_PUBLIC_HOST || (wildcard ? '127.0.0.1' : host),
    publicHostSet: Boolean(env.TRIBUTARY_PUBLIC_HOST),
    publicOrigin: origin(env, 'TRIBUTARY_PUBLIC_URL'),
    apiPort: port(env, 'TRIBUTARY_API_PORT', 8080),
    proxyPort: port(env, 'TRIBUTARY_PROXY_PORT', 8081),
    eventsPort: port(env, 'TRIBUTARY_EVENTS_PORT', 8082),
    dataDir: path.resolve(env.TRIBUTARY_DATA_DIR || '.tributary'),
    databaseUrl: env.DATABASE_URL || undefined,
    targetDatabaseUrl: env.TRIBUTARY_TARGET_DATABASE_URL || undefined,
    defaultRegion: region(env, 'TRIBUTARY_DEFAULT_REGION', 'us-west-2'),
    waitingListKinds: kindList(env, 'TRIBUTARY_WAITING_LIST_KINDS'),
    embeddedPgPort: port(env, 'TRIBUTARY_PG_PORT', 54329),
    embeddedPgProcessMemoryMb: env.TRIBUTARY_PG_PROCESS_MEMORY_MB ? positive(env, 'TRIBUTARY_PG_PROCESS_MEMORY_MB', 1) : undefined,
    embeddedPgSlotWalKeepMb: env.TRIBUTARY_PG_MAX_SLOT_WAL_KEEP_MB ? positive(env, 'TRIBUTARY_PG_MAX_SLOT_WAL_KEEP_MB', 64) : undefined,
    kafkaBrokers: (env.KAFKA_BROKERS ?? '')
      .split(',')
      .map((b) => b.trim())
      .filter(Boolean),
    secretKeyBase64: env.TRIBUTARY_SECRET_KEY || undefined,
    adminToken: env.TRIBUTARY_ADMIN_TOKEN || undefined,
    webhookAllowPrivate: env.TRIBUTARY_WEBHOOK_ALLOW_PRIVATE === '1',
    databaseAllowPrivate: env.TRIBUTARY_DATABASE_ALLOW_PRIVATE === '1',
    eventRetentionMs: positive(env, 'TRIBUTARY_EVENT_RETENTION_HOURS', 7 * 24) * 3_600_000,
    eventPartitions: positive(env, 'TRIBUTARY_EVENT_PARTITIONS', 1),
    failedCredentials: {
      perSource: positive(env, 'TRIBUTARY_AUTH_FAILURES_PER_SOURCE', DEFAULT_CREDENTIAL_LIMITS.perSource),
      perAccount: positive(env, 'TRIBUTARY_AUTH_FAILURES_PER_ACCOUNT', DEFAULT_CREDENTIAL_LIMITS.perAccount),
    },
    reverseProxies: count(env, 'TRIBUTARY_REVERSE_PROXIES', 0),
    consumerGroupRetentionMs: positive(env, 'TRIBUTARY_CONSUMER_GROUP_RETENTION_HOURS', 7 * 24) * 3_600_000,
    webhookMaxExhausted: positive(env, 'TRIBUTARY_WEBHOOK_MAX_EXHAUSTED', 10_000),
    webhookDisableAfterMs: positive(env, 'TRIBUTARY_WEBHOOK_DISABLE_AFTER_HOURS', 120) * 3_600_000,
    backfillLimits: {
      perHour: positive(env, 'TRIBUTARY_BACKFILLS_PER_HOUR_PER_ACCOUNT', DEFAULT_BACKFILL_LIMITS.perHour),
      rowsPerDay: positive(env, 'TRIBUTARY_BACKFILL_ROWS_PER_DAY_PER_ACCOUNT', DEFAULT_BACKFILL_LIMITS.rowsPerDay),
      rowsPerSecond: positive(env, 'TRIBUTARY_BACKFILL_ROWS_PER_SECOND_PER_ACCOUNT', DEFAULT_BACKFILL_LIMITS.rowsPerSecond),
    },
    webhookBounds: {
      perHost: positive(env, 'TRIBUTARY_WEBHOOK_MAX_PER_HOST_PER_SECOND', DEFAULT_DELIVERY_BOUNDS.perHost),
      perAccount: positive(env, 'TRIBUTARY_WEBHOOK_MAX_PER_ACCOUNT_PER_SECOND', DEFAULT_DELIVERY_BOUNDS.perAccount),
      heldPerAccount: positive(env, 'TRIBUTARY_WEBHOOK_MAX_HELD_EVENTS_PER_ACCOUNT', DEFAULT_DELIVERY_BOUNDS.heldPerAccount),
      inFlightPerAccount: positive(env, 'TRIBUTARY_WEBHOOK_MAX_IN_FLIGHT_PER_ACCOUNT', DEFAULT_DELIVERY_BOUNDS.inFlightPerAccount),
    },
    upstreams: parseUpstreams(env.TRIBUTARY_UPSTREAMS),
    roles: parseRoles(env.TRIBUTARY_ROLES),
    maxSyncsPerProcess: positive(env, 'TRIBUTARY_MAX_SYNCS_PER_PROCESS', DEFAULT_MAX_SYNCS),
    tenantLimits: {
      longPolls: positive(env, 'TRIBUTARY_MAX_LONG_POLLS_PER_ACCOUNT', DEFAULT_TENANT_LIMITS.longPolls),
      waits: positive(env, 'TRIBUTARY_MAX_WAITS_PER_ACCOUNT', DEFAULT_TENANT_LIMITS.waits),
      reads: positive(env, 'TRIBUTARY_MAX_READS_PER_ACCOUNT', DEFAULT_TENANT_LIMITS.reads),
      requests: positive(env, 'TRIBUTARY_MAX_WORKING_REQUESTS_PER_ACCOUNT', DEFAULT_TENANT_LIMITS.requests),
      controlConnections: positive(env, 'TRIBUTARY_MAX_CONTROL_CONNECTIONS_PER_ACCOUNT', DEFAULT_TENANT_LIMITS.controlConnections),
      requestsPerSecond: positive(env, 'TRIBUTARY_MAX_REQUESTS_PER_SECOND_PER_ACCOUNT', DEFAULT_TENANT_LIMITS.requestsPerSecond),
    },
    ...overrides,
  };
}
