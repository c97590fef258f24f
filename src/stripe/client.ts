import { createHash } from 'node:crypto';
import type { Secret } from '../control/secrets.ts';
import type { AcquireOptions, QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import { type Backoff, backoffDelay } from '../retry.ts';
import { pause } from '../time.ts';
import { exchange, jsonOf, UpstreamUnreachable } from '../upstream/http.ts';
import { STRIPE_API_VERSION } from './catalog.ts';

export type StripeErrorKind =
  | 'auth' // 401: the key was rejected
  | 'permission' // 403: a restricted key without this resource's read permission
  | 'missing' // 404: no such object (or route)
  | 'rate_limited' // 429
  | 'invalid' // other 4xx
  | 'transient'; // 5xx, network, unreadable answers

export class StripeError extends Error {
  constructor(
    readonly kind: StripeErrorKind,
    readonly status: number,
    message: string,
    readonly code?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StripeError';
  }
}

/**
 * Stripe's documented limits per account: 25 read requests/s in test mode, 100 live. The
 * margin for the jitter between our grant and Stripe's count of a request is half the
 * default: a 429 costs one retry a quarter second later and doubles it for ten minutes,
 * while every millisecond of it is a share of a backfill's speed.
 */
export function stripeRule(key: string): QuotaRule {
  return { limit: isTestKey(key) ? 25 : 100, windowMs: 1000, marginMs: 20 };
}

/** A transient failure or a 429 (Stripe has no lockout): 250 ms doubling to 8 s before the next attempt. */
const STRIPE_BACKOFF: Backoff = { initialMs: 250, maxMs: 8000 };

export const isTestKey = (key: string) => /^(sk|rk)_test_/.test(key);

/** The quota key: the account when known, else a digest of the API key (never the key). */
export function stripeQuotaKey(accountId: string | null | undefined, key: string): string {
  return `stripe:${accountId ?? createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
}

export interface StripeList<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  url?: string;
}

export type StripeObject = { id?: string; object?: string; [field: string]: unknown };

export interface StripeClientOptions {
  /** https://api.stripe.com, or a fake's address. */
  baseUrl: string;
  key: Secret;
  /** Shared quota; absent = no limiting. */
  limiter?: QuotaLimiter;
  quotaKey: string;
  quota?: Omit<AcquireOptions, 'signal'>;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Attempts for 429s and transient failures, with growing back-off. */
  attempts?: number;
  rule?: QuotaRule;
  /** Told of every 429 Stripe answers (the sync's metrics count them). */
  onRateLimited?: (note: string) => void;
  /**
   * A connected account the key's account acts on (`Stripe-Account`). Its requests count
   * against the key's account (UPSTREAMS.md), so they share its quota key.
   */
  stripeAccount?: string;
}

type Params = Record<string, string | number | boolean | string[] | undefined>;

/** Per request: told of each failure about to be retried (a 429 waited out, a 5xx), so the caller can say why it is held up. */
export interface RequestNotes {
  onRetry?(error: StripeError | UpstreamUnreachable): void;
}

/** Stripe's bracket form: `types[]=a&types[]=b`, `created[gte]=1`. */
export function encodeParams(params: Params): string {
  const out = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.append(`${name}[]`, v);
    else out.append(name, String(value));
  }
  return out.toString();
}

/** What a 429 means for the sync, for its status. */
const STRIPE_429_NOTE =
  "Stripe answered 429: the account's requests, the sync's and other clients' together, went over Stripe's rate limit. The sync waits and tries again; requests sent through the proxy share the limit with the sync instead.";

/** The Stripe API as the sync reads it: every call through the shared quota, the API version pinned. */
export class StripeClient {
  constructor(private readonly options: StripeClientOptions) {}

  async request<T>(method: 'GET' | 'POST' | 'DELETE', path: string, params: Params = {}, notes?: RequestNotes): Promise<T> {
    const attempts = this.options.attempts ?? 6;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once<T>(method, path, params);
      } catch (error) {
        const retryable =
          error instanceof UpstreamUnreachable || (error instanceof StripeError && (error.kind === 'transient' || error.kind === 'rate_limited'));
        if (error instanceof StripeError && error.kind === 'rate_limited') {
          this.options.limiter?.refusedByUpstream(this.options.quotaKey);
          this.options.onRateLimited?.(STRIPE_429_NOTE);
        }
        if (!retryable || attempt >= attempts || this.options.signal?.aborted) throw error;
        notes?.onRetry?.(error);
        // Stripe has no lockout: a 429 only means this second is spent.
        await pause(backoffDelay(STRIPE_BACKOFF, attempt), this.options.signal);
      }
    }
  }

  private async once<T>(method: 'GET' | 'POST' | 'DELETE', path: string, params: Params): Promise<T> {
    const { limiter, quota, signal } = this.options;
    const key = this.options.key.reveal();
    const grant = limiter && (await limiter.acquire(this.options.quotaKey, this.options.rule ?? stripeRule(key), { kind: 'sync', ...quota, signal }));
    const form = encodeParams(params);
    const response = await exchange({
      counted: grant,
      method,
      url: this.options.baseUrl + path + (method !== 'POST' && form ? `?${form}` : ''),
      headers: {
        authorization: `Bearer ${key}`,
        'stripe-version': STRIPE_API_VERSION,
        ...(this.options.stripeAccount ? { 'stripe-account': this.options.stripeAccount } : {}),
        ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: method === 'POST' ? form : undefined,
      timeoutMs: this.options.timeoutMs ?? 30_000,
      signal,
    });
    const parsed = jsonOf(
      response,
      (cause) => new StripeError('transient', response.status, `Stripe sent an unreadable answer to ${method} ${path}`, undefined, { cause }),
    );
    if (response.status >= 200 && response.status < 300) {
      if (parsed === null || typeof parsed !== 'object')
        throw new StripeError('transient', response.status, `Stripe sent an empty answer to ${method} ${path}`);
      return parsed as T;
    }
    throw classify(response.status, parsed as { error?: { type?: string; code?: string; message?: string } } | undefined);
  }

  /** The same client acting on a connected account, or (null) on the key's own. */
  forAccount(account: string | null): StripeClient {
    const { stripeAccount: _own, ...options } = this.options;
    return new StripeClient(account ? { ...options, stripeAccount: account } : options);
  }

  /** The requests a second this client may send: its share of the account's limit. */
  get requestsPerSecond(): number {
    return this.options.quota?.syncLimit ?? (this.options.rule ?? stripeRule(this.options.key.reveal())).limit;
  }

  /** The connected account this client acts on; null for the key's own. */
  get account(): string | null {
    return this.options.stripeAccount ?? null;
  }

  /** One page of a list, newest first; `paged: false` for the lists that refuse `limit`. */
  async listPage(path: string, params: Params = {}, paged = true, notes?: RequestNotes): Promise<StripeList<StripeObject>> {
    const page = await this.request<StripeList<StripeObject>>('GET', path, paged ? { limit: 100, ...params } : params, notes);
    if (!Array.isArray(page.data)) throw new StripeError('transient', 200, `Stripe sent a list without data for ${path}`);
    return page;
  }

  /** Every object of a short list (accounts, webhook endpoints), page after page. */
  async listAll(path: string, params: Params = {}): Promise<StripeObject[]> {
    const all: StripeObject[] = [];
    for (let after: string | undefined; ; ) {
      const page = await this.listPage(path, after ? { ...params, starting_after: after } : params);
      all.push(...page.data);
      after = page.data.at(-1)?.id;
      if (!page.has_more || !after) return all;
    }
  }
}

function classify(status: number, body: { error?: { type?: string; code?: string; message?: string } } | undefined): StripeError {
  const message = body?.error?.message ?? `HTTP ${status}`;
  const code = body?.error?.code;
  if (status === 401) return new StripeError('auth', status, `the Stripe key was rejected (${message})`, code);
  if (status === 403) return new StripeError('permission', status, message, code);
  if (status === 404) return new StripeError('missing', status, message, code);
  if (status === 429) return new StripeError('rate_limited', status, `Stripe rate limit reached (${message})`, code);
  if (status >= 500) return new StripeError('transient', status, `Stripe answered ${status} (${message})`, code);
  return new StripeError('invalid', status, message, code);
}
