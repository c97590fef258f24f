import type pg from 'pg';
import { Secret } from '../../control/secrets.ts';
import type { Logger } from '../../log.ts';
import type { QuotaLimiter } from '../../quota/limiter.ts';
import { StripeClient, StripeError, type StripeObject, stripeQuotaKey, stripeRule } from '../client.ts';
import { hashToken as digestOf } from '../../control/secrets.ts';

/**
 * The Stripe key a request carries: HTTP basic with the key as user name (curl's
 * shape) or `Authorization: Bearer` (stripe-node). Undefined when there is none.
 */
export function stripeKeyOf(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const [scheme, value] = authorization.trim().split(/\s+/, 2);
  if (!scheme || !value) return undefined;
  let key: string | undefined;
  if (scheme.toLowerCase() === 'bearer') key = value;
  else if (scheme.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    key = decoded.slice(0, decoded.includes(':') ? decoded.indexOf(':') : undefined);
  }
  return key && /^[A-Za-z0-9_]{8,255}$/.test(key) ? key : undefined;
}

export interface StripeAccountsOptions {
  /** Where api.stripe.com is reached. */
  baseUrl: string;
  limiter?: QuotaLimiter;
  logger: Logger;
  /** How long an answer is kept (default 10 min; a refusal 1 min). */
  ttlMs?: number;
  maxWaitMs: number;
  /** The control database: a key a sync was made with has its account recorded there. */
  pool?: pg.Pool;
}

interface Known {
  accountId: string | undefined;
  until: number;
}

const MAX_KEYS = 10_000;

/**
 * Which account a key belongs to, asked of Stripe once (`GET /v1/account` with that key,
 * through the shared quota under the key's digest, as the sync's creation check does) and
 * remembered by the key's digest: never the key itself. A key that may not read the
 * account (a restricted key) or is refused has no known account for a minute; a failure
 * to reach Stripe is not remembered.
 */
export class StripeAccounts {
  private readonly known = new Map<string, Known>();
  private readonly pending = new Map<string, Promise<string | undefined>>();

  constructor(private readonly options: StripeAccountsOptions) {}

  async accountOf(key: string): Promise<string | undefined> {
    const digest = digestOf(key);
    const hit = this.known.get(digest);
    if (hit && hit.until > Date.now()) return hit.accountId;
    let lookup = this.pending.get(digest);
    if (!lookup) {
      lookup = this.ask(key, digest).finally(() => this.pending.delete(digest));
      this.pending.set(digest, lookup);
    }
    return lookup;
  }

  private async ask(key: string, digest: string): Promise<string | undefined> {
    // The sync's own key (the usual case) needs no request: its account was read at creation.
    // Asking Stripe costs a request the quota can place in the account's window only after the
    // answer; on top of a sync using its whole share, that one was a 429 for the customer.
    const recorded = await this.options.pool
      ?.query<{ account: string }>(
        "SELECT upstream_account_id AS account FROM syncs WHERE kind = 'stripe' AND state = 'active' AND api_key_sha256 = $1 AND upstream_account_id IS NOT NULL LIMIT 1",
        [digest],
      )
      .then((r) => r.rows[0]?.account);
    if (recorded) {
      this.known.set(digest, { accountId: recorded, until: Date.now() + (this.options.ttlMs ?? 10 * 60_000) });
      return recorded;
    }
    const client = new StripeClient({
      baseUrl: this.options.baseUrl,
      key: new Secret(key),
      limiter: this.options.limiter,
      quotaKey: stripeQuotaKey(null, key),
      quota: { kind: 'client', maxWaitMs: this.options.maxWaitMs },
      attempts: 1,
      timeoutMs: 10_000,
    });
    const remember = (accountId: string | undefined, ttlMs: number) => {
      if (this.known.size >= MAX_KEYS) this.known.delete(this.known.keys().next().value!);
      this.known.set(digest, { accountId, until: Date.now() + ttlMs });
      return accountId;
    };
    try {
      const account = await client.request<StripeObject>('GET', '/v1/account');
      const accountId = typeof account.id === 'string' ? account.id : undefined;
      // Stripe counted the lookup against the account, which the limiter could not know
      // before the answer: it takes a slot of the account's window now, so the window holds it.
      if (accountId && this.options.limiter) {
        (await this.options.limiter.acquire(stripeQuotaKey(accountId, key), stripeRule(key), { kind: 'client', maxWaitMs: this.options.maxWaitMs })).sent();
      }
      return remember(accountId, this.options.ttlMs ?? 10 * 60_000);
    } catch (error) {
      if (error instanceof StripeError && error.kind !== 'transient' && error.kind !== 'rate_limited') return remember(undefined, 60_000);
      this.options.logger.warn({ error: (error as Error).message }, 'could not ask Stripe which account a key belongs to');
      return undefined;
    }
  }
}
