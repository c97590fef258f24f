import { createHash } from 'node:crypto';
import type { Secret } from '../control/secrets.ts';
import type { AcquireOptions, QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import { type Backoff, backoffDelay } from '../retry.ts';
import { pause } from '../time.ts';
import { exchange, jsonOf, UpstreamUnreachable } from '../upstream/http.ts';
import type { TokenOwners } from './owners.ts';
import type { AirtableRecord, AirtableTable, ListPage } from './types.ts';

/** Airtable's documented limit: 5 requests per second per base. */
export const AIRTABLE_RULE: QuotaRule = { limit: 5, windowMs: 1000, lockout: true };

/**
 * And 50 requests per second for all traffic of one user's (or service account's) personal
 * access tokens together, across every base they reach.
 */
export const AIRTABLE_USER_RULE: QuotaRule = { limit: 50, windowMs: 1000, lockout: true };

/**
 * The syncs of one user take at most this many of the user's 50 a second together (the
 * operator may change it: TRIBUTARY_AIRTABLE_USER_SYNC_SHARE). The rest is left to clients,
 * to a token's first request before its user is known (a new sync's whoami), and to the user's
 * own requests straight to Airtable, which the quota cannot see.
 */
export const AIRTABLE_USER_SYNC_SHARE = 40;

/**
 * A sync's requests of a base, within its share (`syncLimit` of the base's 5 a second).
 * `urgent` as a function is asked at each try of each request: a waiter may have arrived,
 * or have been answered, meanwhile.
 */
export function syncQuota(syncLimit: number, urgent: boolean | (() => boolean)): Omit<AcquireOptions, 'signal'> {
  return { kind: 'sync', syncLimit, shareMargin: true, urgent };
}

/** The limiter key of a user's quota. */
export const airtableUserKey = (userId: string) => `airtable-user:${userId}`;

/** Until its user is known, a token's requests count under the token itself: a digest, never the token. */
export const airtableTokenKey = (token: string) => `airtable-token:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`;

/**
 * Of a user's 50 a second, the requests the quota counts (with their user known) take at most
 * 48: the other 2 are for requests it cannot count before they go, a token's first requests
 * while its user is unknown (the whoami that learns it is one, counted only once answered).
 */
export const AIRTABLE_USER_UNCOUNTED = 2;

/**
 * The quota of a token's user (or of the token, while its user is unknown) beside a base's
 * rule, on the same time scale (tests speed both up together).
 */
export const userQuotaOf = (owner: string | undefined, token: string, baseRule: QuotaRule) => ({
  key: owner === undefined ? airtableTokenKey(token) : airtableUserKey(owner),
  rule: {
    limit: AIRTABLE_USER_RULE.limit - AIRTABLE_USER_UNCOUNTED,
    windowMs: (AIRTABLE_USER_RULE.windowMs * baseRule.windowMs) / AIRTABLE_RULE.windowMs,
    lockout: AIRTABLE_USER_RULE.lockout,
  },
});

export type AirtableErrorKind =
  | 'auth' // 401/403: the key was rejected or cannot see the base
  | 'iterator' // 422 offset expired or invalid: restart the listing
  | 'rate_limited' // 429: locked out for 30 s
  | 'invalid' // other 4xx: our request was wrong
  | 'transient'; // 5xx, network, truncated answers

export class AirtableError extends Error {
  constructor(
    readonly kind: AirtableErrorKind,
    readonly status: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AirtableError';
  }
}

export interface AirtableClientOptions {
  /** https://api.airtable.com, or a fake's address. */
  baseUrl: string;
  token: Secret;
  baseId: string;
  /** Shared quota; absent = no limiting (benchmarks against an unlimited fake). */
  limiter?: QuotaLimiter;
  quota?: Omit<AcquireOptions, 'signal'>;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Attempts for transient failures (5xx, network, truncated), with growing back-off. */
  attempts?: number;
  /** How long a 429 locks the base out (Airtable: 30 s). */
  lockoutMs?: number;
  /** The base's limit; benchmarks with a time-scaled fake pass a scaled one. */
  rule?: QuotaRule;
  /** Told of every 429 Airtable answers (the sync's metrics count them). */
  onRateLimited?: (note: string) => void;
  /**
   * Who owns the token: its requests count against its user's 50 requests a second, which all
   * of that user's tokens share. Absent, or while the user is unknown: against the token's own.
   */
  owners?: TokenOwners;
  /** Ask Airtable (whoami, once per token across processes) when nobody knows the token's user yet. */
  learnOwner?: boolean;
  /** Sync requests: their share of the user's quota (AIRTABLE_USER_SYNC_SHARE). */
  userSyncLimit?: number;
  /** Told of every request the quota granted: how long it waited for the user's quota. */
  onGranted?: (heldByUserMs: number) => void;
}

interface ErrorBody {
  error?: { type?: string; message?: string } | string;
  errors?: Array<{ error?: string; message?: string }>;
}

function classify(status: number, body: ErrorBody | undefined): AirtableError {
  const type = typeof body?.error === 'object' ? body.error.type : (body?.error ?? body?.errors?.[0]?.error);
  const message = (typeof body?.error === 'object' ? body.error.message : body?.errors?.[0]?.message) ?? `HTTP ${status}`;
  const text = `${type ?? `HTTP ${status}`}: ${message}`;
  if (status === 401) return new AirtableError('auth', status, `the Airtable key was rejected (${text})`);
  if (status === 403) return new AirtableError('auth', status, `the Airtable key cannot read this base or lacks a scope (${text})`);
  if (status === 429) return new AirtableError('rate_limited', status, `Airtable rate limit reached (${text})`);
  if (status === 422 && (type === 'LIST_RECORDS_ITERATOR_NOT_AVAILABLE' || type === 'INVALID_OFFSET_VALUE')) {
    return new AirtableError('iterator', status, text);
  }
  if (status >= 500) return new AirtableError('transient', status, `Airtable answered ${status} (${text})`);
  return new AirtableError('invalid', status, text);
}

const LOCKOUT_MS = 30_000;
/** A transient failure (5xx, network, a cut body): 500 ms doubling to 8 s before the next attempt. */
const AIRTABLE_BACKOFF: Backoff = { initialMs: 500, maxMs: 8000 };

/** What a 429 means for the sync, for its status: most often requests sent straight to Airtable beside it. */
const AIRTABLE_429_NOTE =
  "Airtable answered 429: this base's requests, the sync's and other clients' together, went over Airtable's 5 a second (or the token's user over its 50), and Airtable refuses the base for 30 s. Requests sent straight to Airtable count too; sent through the proxy, they share the limit with the sync instead.";

/** The Airtable Web API, as the sync and the creation check use it; every call goes through the quota. */
export class AirtableClient {
  /** The token's user, once known. */
  private owner: string | undefined;

  constructor(private readonly options: AirtableClientOptions) {}

  get baseId(): string {
    return this.options.baseId;
  }

  /** `baseless`: the request names no base (whoami), so it counts against the user's quota alone. */
  async request<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, baseless = false): Promise<T> {
    const attempts = this.options.attempts ?? 4;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once<T>(method, path, body, baseless);
      } catch (error) {
        const locked = error instanceof AirtableError && error.kind === 'rate_limited';
        if (locked) {
          // Either limit may have been passed: the base's or its user's.
          this.options.limiter?.refusedByUpstream(this.options.baseId);
          if (this.owner !== undefined) this.options.limiter?.refusedByUpstream(airtableUserKey(this.owner));
          this.options.onRateLimited?.(AIRTABLE_429_NOTE);
        }
        const retryable = locked || error instanceof UpstreamUnreachable || (error instanceof AirtableError && error.kind === 'transient');
        if (!retryable || attempt >= attempts || this.options.signal?.aborted) throw error;
        // A 429 locks the base out for 30 s; hammering it would only extend the lockout.
        await pause(locked ? (this.options.lockoutMs ?? LOCKOUT_MS) : backoffDelay(AIRTABLE_BACKOFF, attempt), this.options.signal);
      }
    }
  }

  /** How a request that names no base asks for its user's quota alone: as its client's, within the syncs' share. */
  private alone(): Omit<AcquireOptions, 'signal'> {
    const { quota, userSyncLimit } = this.options;
    return {
      kind: quota?.kind ?? 'sync',
      urgent: quota?.urgent,
      maxWaitMs: quota?.maxWaitMs,
      ...(userSyncLimit === undefined ? {} : { syncLimit: userSyncLimit, shareMargin: true }),
    };
  }

  /** The quota of the token's user; `learn`: ask Airtable when nobody knows the user yet (learnOwner). */
  private async userQuota(rule: QuotaRule, learn: boolean) {
    const token = this.options.token.reveal();
    const { owners } = this.options;
    if (this.owner === undefined && owners) {
      this.owner =
        learn && this.options.learnOwner
          ? await owners.learn(token, async () => {
              await this.whoami();
              return this.owner;
            })
          : await owners.owner(token);
    }
    return userQuotaOf(this.owner, token, rule);
  }

  private async once<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body: unknown, baseless: boolean): Promise<T> {
    const { limiter, quota, signal } = this.options;
    const rule = this.options.rule ?? AIRTABLE_RULE;
    // Every request counts against its base and against its user (all of the user's tokens, every base).
    const user = limiter && (await this.userQuota(rule, !baseless));
    const grant =
      limiter &&
      (baseless
        ? await limiter.acquire(user!.key, user!.rule, { ...this.alone(), signal })
        : await limiter.acquire(this.options.baseId, rule, {
            kind: 'sync',
            ...quota,
            also: { ...user!, ...(this.options.userSyncLimit === undefined ? {} : { syncLimit: this.options.userSyncLimit }) },
            signal,
          }));
    if (grant) this.options.onGranted?.(grant.heldByAlsoMs);
    const response = await exchange({
      counted: grant,
      method,
      url: this.options.baseUrl + path,
      headers: {
        authorization: `Bearer ${this.options.token.reveal()}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      timeoutMs: this.options.timeoutMs ?? 30_000,
      signal,
    });
    // A cut-off or garbled answer is a failed request, never an empty page.
    const parsed = jsonOf(
      response,
      (cause) => new AirtableError('transient', response.status, `Airtable sent an unreadable answer to ${method} ${path.split('?')[0]}`, { cause }),
    );
    if (response.status < 200 || response.status >= 300) throw classify(response.status, parsed as ErrorBody | undefined);
    return parsed as T;
  }

  /**
   * The token's user and scopes. With `owners`, the user is recorded for every process. A
   * whoami counts against the user's quota like any request; while the user was unknown it
   * was counted under the token, so it takes a slot of the user's quota once the answer names
   * the user.
   */
  async whoami(): Promise<{ id: string; scopes?: string[] }> {
    const { owners, limiter } = this.options;
    const token = this.options.token.reveal();
    const before = this.owner ?? (await owners?.owner(token));
    const me = await this.request<{ id: string; scopes?: string[] }>('GET', '/v0/meta/whoami', undefined, true);
    // An id that does not look like one is not kept: the token then counts under itself.
    if (before === undefined && owners && typeof me?.id === 'string' && /^[A-Za-z0-9]{1,64}$/.test(me.id)) {
      this.owner = await owners.record(token, me.id);
      if (limiter) {
        const user = userQuotaOf(me.id, token, this.options.rule ?? AIRTABLE_RULE);
        (await limiter.acquire(user.key, user.rule, { ...this.alone(), signal: this.options.signal })).answered();
      }
    }
    return me;
  }

  async bases(): Promise<Array<{ id: string; name: string }>> {
    return (await this.request<{ bases: Array<{ id: string; name: string }> }>('GET', '/v0/meta/bases')).bases;
  }

  async schema(): Promise<AirtableTable[]> {
    const answer = await this.request<{ tables: AirtableTable[] }>('GET', `/v0/meta/bases/${this.options.baseId}/tables`);
    if (!Array.isArray(answer?.tables)) throw new AirtableError('transient', 200, 'Airtable sent a schema without tables');
    return answer.tables;
  }

  /**
   * Airtable answers 403 INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND both to a key that cannot read
   * the base and for a table that no longer exists (deleted in the UI while a cycle or a
   * fetch was on its way). True when `error` is such a 403 and the base's schema, read now,
   * has no such table: the table is gone, the key is fine. A key that really lost the base
   * fails the schema read too (that error is thrown).
   */
  async tableGone(error: unknown, tableId: string): Promise<boolean> {
    if (!(error instanceof AirtableError && error.status === 403)) return false;
    return !(await this.schema()).some((t) => t.id === tableId);
  }

  /** One page of a table; POST listRecords keeps long formulas out of the URL. */
  async listPage(tableId: string, options: { offset?: string; filterByFormula?: string; pageSize?: number } = {}): Promise<ListPage> {
    const page = await this.request<ListPage>('POST', `/v0/${this.options.baseId}/${encodeURIComponent(tableId)}/listRecords`, {
      pageSize: options.pageSize ?? 100,
      returnFieldsByFieldId: true,
      ...(options.offset ? { offset: options.offset } : {}),
      ...(options.filterByFormula ? { filterByFormula: options.filterByFormula } : {}),
    });
    if (!Array.isArray(page?.records)) throw new AirtableError('transient', 200, 'Airtable sent a page without records');
    return page;
  }

  /** Current versions of the given records (missing ones were deleted). */
  async recordsById(tableId: string, ids: string[]): Promise<AirtableRecord[]> {
    const out: AirtableRecord[] = [];
    for (let i = 0; i < ids.length; i += 50) {
      const chunk = ids.slice(i, i + 50).filter((id) => /^rec[A-Za-z0-9]+$/.test(id));
      if (chunk.length === 0) continue;
      const formula = `OR(${chunk.map((id) => `RECORD_ID()='${id}'`).join(',')})`;
      let offset: string | undefined;
      do {
        const page = await this.listPage(tableId, { filterByFormula: formula, offset });
        out.push(...page.records);
        offset = page.offset;
      } while (offset);
    }
    return out;
  }
}
