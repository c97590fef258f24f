import type http from 'node:http';
import type pg from 'pg';
import type { Logger } from '../log.ts';
import type { QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import type { ProxyRoute } from './routing.ts';
import type { SyncTargets } from './targets.ts';

/** What a kind's proxy may use, given once when the proxy starts. */
export interface ProxyKindContext {
  targets: SyncTargets;
  limiter?: QuotaLimiter;
  /** Control database. */
  pool: pg.Pool;
  /** Time scale of the upstream (benchmarks against a sped-up fake); 1 in production. */
  timeScale: number;
  /** How long a fetch the write-through needs may wait for the quota. */
  maxWaitMs: number;
  logger: Logger;
  /** Where the kind's upstream host is reached. */
  baseUrl: string;
}

export interface AnswerMeta {
  receivedAt: number;
  /** The answer's Stripe-Version and Date headers. */
  apiVersion: string | undefined;
  date: string | undefined;
}

/** What a write-through did: for the proxy's log and metrics. */
export interface WriteResult {
  syncs: number;
  written: number;
  deleted: number;
  fetched: boolean;
}

/** The shared-quota key and rule a request counts against. */
export interface PlanQuota {
  key: string;
  rule: QuotaRule;
  /** A second quota the request counts against (Airtable's per-user one, across bases). */
  also?: { key: string; rule: QuotaRule };
  /** How the proxy's 429 names the quota ("Airtable base app…"). */
  label?: string;
  /**
   * The credential the request carries (the proxy keeps only its digest). Until it is known
   * good for `key` (src/proxy/credentials.ts) the request gets only the unverified allowance.
   */
  credential?: string;
  /** The quota is the credential's own (its account, learned from the upstream, or its digest): no check needed. */
  proven?: boolean;
  /** How many unverified requests a window may hold (default 1). */
  unverified?: number;
}

/** What to do with one request, decided before it goes upstream. */
export interface Plan {
  /** Path and query sent upstream. */
  path: string;
  /** The body, when it had to be read first (a write, a translation); otherwise the client's is streamed. */
  body?: Buffer;
  /** The quota the request counts against; none without credentials to count. */
  quota?: PlanQuota;
  /**
   * Called once when the request ends: with the upstream's status as soon as it answers, or
   * undefined when it never went or no answer came (a kind may learn from a 2xx).
   */
  ended?: (status: number | undefined) => void;
  /** For a write: what to write on a 2xx answer, before the client gets it. */
  writeThrough?: (answer: unknown, meta: AnswerMeta) => Promise<WriteResult>;
}

/** One proxied request as a kind's planner sees it. */
export interface PlanRequest {
  req: http.IncomingMessage;
  route: ProxyRoute;
  /** The whole body, read on demand (a write, a translation); undefined without one. */
  readBody(): Promise<Buffer | undefined>;
  /** The quota earlyQuota() gave, when it gave one. */
  early?: PlanQuota;
}

/** A kind's part of the proxy: how its requests are routed, counted, planned and written through. */
export interface KindProxy {
  /** The first path segment of a bare path (`/v0/…`) that belongs to this kind's host, if it has one. */
  readonly barePrefix?: string;
  /**
   * The quota of a request known from its path and credentials alone (and what the kind
   * remembers of them), so the proxy can ask for it while the body still arrives. Optional:
   * otherwise the plan's quota is waited for.
   */
  earlyQuota?(context: ProxyKindContext, req: http.IncomingMessage, route: ProxyRoute): Promise<PlanQuota | undefined>;
  /**
   * The credentials (SHA-256 hex digests) the active syncs of this kind use under this quota
   * key: such a credential is known good without a request first.
   */
  syncCredentials?(context: ProxyKindContext, quotaKey: string): Promise<string[]>;
  /** Made once per proxy (a kind may keep state: Stripe's accounts by key). */
  planner(context: ProxyKindContext): (request: PlanRequest) => Promise<Plan>;
}
