import type pg from 'pg';
import { Secret } from '../../control/secrets.ts';
import type { Logger } from '../../log.ts';
import type { QuotaLimiter } from '../../quota/limiter.ts';
import { StripeClient, StripeError, type StripeObject, stripeQuotaKey, stripeRule } from '../client.ts';
import { hashToken as digestOf } from '../../control/secrets.ts';
import { refuse } from '../../proxy/errors.ts';
import { trimOldest } from '../../bounded-map.ts';

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

/** Requests that may wait behind a new key's first one; the next is the proxy's 429. */
const MAX_BEHIND_PROBE = 50;

/** A request with a key whose account is not known: how it counts, and how to report its end. */
export interface Admission {
  accountId: string | undefined;
  /** Whether the account is known (recorded or learned). */
  known: boolean;
  /** The key's first request (the probe): call once it ends, with the upstream's status if one came. */
  settle?: (status: number | undefined) => void;
}

/** How long "no sync uses this key" is believed: a key given to a new sync is seen this much later. */
const UNRECORDED_TTL_MS = 30_000;

/**
 * Which account a key belongs to. A sync's own key has it recorded in the control database;
 * any other key is asked of Stripe (`GET /v1/account` with that key, through the shared quota
 * under the key's digest, as the sync's creation check does), but only once the key has had
 * a 2xx answer through the proxy: an invalid key never costs a second request. Remembered by
 * the key's digest, never the key itself. A key that may not read the account (a restricted
 * key) or is refused has no known account for a minute; a failure to reach Stripe is not
 * remembered.
 */
export class StripeAccounts {
  private readonly known = new Map<string, Known>();
  private readonly pending = new Map<string, Promise<string | undefined>>();
  /** A new key's first request in flight, by digest: the others wait for its answer. */
  private readonly probes = new Map<string, { done: Promise<void>; behind: number }>();
  /** Keys no sync uses, by digest, until when: a flood of unknown keys is not a query each. */
  private readonly unrecorded = new Map<string, number>();

  constructor(private readonly options: StripeAccountsOptions) {}

  /** The account, if known without asking Stripe: remembered, or recorded for a sync's key. */
  async recorded(key: string): Promise<{ accountId: string | undefined } | undefined> {
    const digest = digestOf(key);
    const hit = this.known.get(digest);
    if (hit && hit.until > Date.now()) return { accountId: hit.accountId };
    if ((this.unrecorded.get(digest) ?? 0) > Date.now()) return undefined;
    // The sync's own key (the usual case) needs no request: its account was read at creation.
    const recorded = await this.options.pool
      ?.query<{ account: string }>(
        "SELECT upstream_account_id AS account FROM syncs WHERE kind = 'stripe' AND state = 'active' AND api_key_sha256 = $1 AND upstream_account_id IS NOT NULL LIMIT 1",
        [digest],
      )
      .then((r) => r.rows[0]?.account);
    if (!recorded) {
      this.unrecorded.set(digest, Date.now() + UNRECORDED_TTL_MS);
      trimOldest(this.unrecorded, MAX_KEYS);
      return undefined;
    }
    this.remember(digest, recorded, this.options.ttlMs ?? 10 * 60_000);
    return { accountId: recorded };
  }

  /**
   * How a request with this key counts. A key not known yet goes one request at a time until
   * Stripe accepts it (a 2xx); then its account is asked once and the requests waiting behind
   * go on counting against it. So a new client's burst never runs past the account's limit
   * under the key's digest, and an invalid key costs one request in flight, never a lookup.
   */
  async admit(key: string, maxWaitMs: number): Promise<Admission> {
    const digest = digestOf(key);
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      const known = await this.recorded(key);
      if (known) return { accountId: known.accountId, known: true };
      const probe = this.probes.get(digest);
      if (!probe || Date.now() >= deadline) return probe ? { accountId: undefined, known: false } : this.startProbe(key, digest);
      if (probe.behind >= MAX_BEHIND_PROBE) {
        throw refuse('too_many_requests', 'this Stripe key has not been accepted by Stripe yet: its first request is still out; retry after 1 s', {
          'retry-after': '1',
        });
      }
      probe.behind++;
      try {
        await Promise.race([probe.done, new Promise((resolve) => setTimeout(resolve, deadline - Date.now()).unref())]);
      } finally {
        probe.behind--;
      }
    }
  }

  private startProbe(key: string, digest: string): Admission {
    let finish!: () => void;
    const probe = { done: new Promise<void>((resolve) => (finish = resolve)), behind: 0 };
    this.probes.set(digest, probe);
    let settled = false;
    const end = () => {
      if (this.probes.get(digest) === probe) this.probes.delete(digest);
      finish();
    };
    return {
      accountId: undefined,
      known: false,
      settle: (status) => {
        if (settled) return;
        settled = true;
        if (status !== undefined && status >= 200 && status < 300)
          this.accountOf(key)
            .then((accountId) => this.counted(key, accountId))
            .then(end, end);
        else end();
      },
    };
  }

  /**
   * Stripe counted a request with the key (the probe, the lookup) against its account, which
   * the limiter could not know before the answer: it takes a slot of the account's window
   * now, so the window holds it.
   */
  private async counted(key: string, accountId: string | undefined): Promise<void> {
    if (!accountId || !this.options.limiter) return;
    const grant = await this.options.limiter.acquire(stripeQuotaKey(accountId, key), stripeRule(key), { kind: 'client', maxWaitMs: this.options.maxWaitMs });
    grant.answered();
  }

  /** The account, asked of Stripe when it is not known yet: call it only for a key Stripe accepted. */
  async accountOf(key: string): Promise<string | undefined> {
    const known = await this.recorded(key);
    if (known) return known.accountId;
    const digest = digestOf(key);
    let lookup = this.pending.get(digest);
    if (!lookup) {
      lookup = this.ask(key, digest).finally(() => this.pending.delete(digest));
      this.pending.set(digest, lookup);
    }
    return lookup;
  }

  private remember(digest: string, accountId: string | undefined, ttlMs: number): string | undefined {
    this.known.set(digest, { accountId, until: Date.now() + ttlMs });
    trimOldest(this.known, MAX_KEYS);
    return accountId;
  }

  private async ask(key: string, digest: string): Promise<string | undefined> {
    const client = new StripeClient({
      baseUrl: this.options.baseUrl,
      key: new Secret(key),
      limiter: this.options.limiter,
      quotaKey: stripeQuotaKey(null, key),
      quota: { kind: 'client', maxWaitMs: this.options.maxWaitMs },
      attempts: 1,
      timeoutMs: 10_000,
    });
    try {
      const account = await client.request<StripeObject>('GET', '/v1/account');
      const accountId = typeof account.id === 'string' ? account.id : undefined;
      await this.counted(key, accountId);
      return this.remember(digest, accountId, this.options.ttlMs ?? 10 * 60_000);
    } catch (error) {
      if (error instanceof StripeError && error.kind !== 'transient' && error.kind !== 'rate_limited') return this.remember(digest, undefined, 60_000);
      this.options.logger.warn({ error: (error as Error).message }, 'could not ask Stripe which account a key belongs to');
      return undefined;
    }
  }
}
