import { createHash } from 'node:crypto';
import { TributaryError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { TokenBuckets } from '../tenancy/token-buckets.ts';
import { trimOldest } from '../bounded-map.ts';

/** Failed credential checks allowed a minute, per client address and per named account. */
export interface CredentialLimits {
  perSource: number;
  perAccount: number;
}

export const DEFAULT_CREDENTIAL_LIMITS: CredentialLimits = { perSource: 10, perAccount: 30 };

export type CredentialInterface = 'management API' | 'console sign-in' | 'event REST';

export interface CredentialAttempt {
  via: CredentialInterface;
  /** The client address (clientAddress()). */
  source: string;
  /**
   * The account the credential names, as given (an event username), whether or not it exists:
   * an unknown name is throttled exactly like a known one, so the throttle tells nothing.
   */
  account?: string;
  /** credentialFingerprint() of the credential: ones that passed lately are let through a throttled key. */
  fingerprint: string;
}

export interface FailedCredentialsOptions {
  logger: Logger;
  limits?: Partial<CredentialLimits>;
  windowMs?: number;
  /** Keys tracked per kind (addresses, accounts), and credentials remembered as good. */
  maxKeys?: number;
  /** How long a credential that passed stays exempt from a throttled address or account. */
  goodForMs?: number;
  /** Where credentials that passed are kept across restarts (the control database); memory only without. */
  store?: KnownGoodStore;
  now?: () => number;
}

/** Credentials that passed lately, by fingerprint, kept where a restart finds them. */
export interface KnownGoodStore {
  /** Those still good at `now`, with when each stops being so. */
  load(now: number): Promise<Array<[fingerprint: string, until: number]>>;
  save(fingerprint: string, until: number): Promise<void>;
}

/** SHA-256 of a credential: kept in memory in its place, never the credential itself. */
export const credentialFingerprint = (...parts: string[]) => createHash('sha256').update(parts.join('\u0000')).digest('base64url');

/**
 * Throttles failed credential checks, in this process's memory: each client address may fail
 * `perSource` times a minute, each named account `perAccount` times (a token bucket each, so
 * a burst of that many, then one every 60/N seconds). Past that, 429 with Retry-After before
 * the credential is even looked at, and one warning a minute per throttled key.
 *
 * The address comes first. An account's empty bucket refuses only addresses that have failed
 * for that account within the window: what the addresses' own buckets do not explain. So
 * strangers spreading wrong guesses over many addresses cannot keep the account's right
 * credential out when it comes from another address; their own addresses are refused.
 *
 * Success is never slowed: a check spends an allowance only until it passes, and credentials
 * that passed in the last `goodForMs` go through even from a throttled address or account
 * (a consumer behind the attacker's NAT, the account under attack itself). With a `store`,
 * that list survives a restart.
 */
export class FailedCredentials {
  private readonly sources: TokenBuckets;
  private readonly accounts: TokenBuckets;
  private readonly good = new Map<string, number>();
  /** When each credential's exemption was last written to the store: rewritten once half of it has passed. */
  private readonly saved = new Map<string, number>();
  /** The last failure of each address for each account (`account NUL address`), within the window. */
  private readonly failedFor = new Map<string, number>();
  private readonly windowMs: number;
  private readonly store: KnownGoodStore | undefined;
  /** Checks under way, by credential: the same credential's other checks wait for the first. */
  private readonly pending = new Map<string, Promise<unknown>>();
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly goodForMs: number;
  private readonly maxKeys: number;

  constructor(options: FailedCredentialsOptions) {
    const limits = { ...DEFAULT_CREDENTIAL_LIMITS, ...options.limits };
    const windowMs = options.windowMs ?? 60_000;
    this.maxKeys = options.maxKeys ?? 50_000;
    this.sources = new TokenBuckets(limits.perSource, windowMs, this.maxKeys);
    this.accounts = new TokenBuckets(limits.perAccount, windowMs, this.maxKeys);
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.goodForMs = options.goodForMs ?? 15 * 60_000;
    this.windowMs = windowMs;
    this.store = options.store;
  }

  /** Loads the credentials that passed before a restart and are still good. */
  async start(): Promise<void> {
    if (!this.store) return;
    for (const [fingerprint, until] of await this.store.load(this.now())) {
      this.good.set(fingerprint, Math.max(until, this.good.get(fingerprint) ?? 0));
      this.saved.set(fingerprint, until - this.goodForMs);
    }
    trimOldest(this.good, this.maxKeys);
  }

  /**
   * Runs `verify` (which throws an 'unauthorized' TributaryError for a wrong credential) under
   * the throttle. Allowances are spent before it runs, so concurrent guesses cannot overdraw
   * them, and given back when it passes or fails for another reason (a database outage).
   */
  async check<T>(attempt: CredentialAttempt, verify: () => Promise<T>): Promise<T> {
    // A client's first requests with a credential often come at once (a pool of connections
    // opening): each spending an allowance would refuse a right credential that never failed,
    // the more so the slower the check. One of them is the check; the others wait for it.
    const first = this.pending.get(attempt.fingerprint);
    if (first && !this.knownGood(attempt.fingerprint)) await first.catch(() => undefined);
    const exempt = this.knownGood(attempt.fingerprint);
    if (!exempt) this.take(attempt);
    const run = this.run(attempt, exempt, verify);
    if (!exempt && !this.pending.has(attempt.fingerprint)) {
      this.pending.set(attempt.fingerprint, run);
      const forget = () => {
        if (this.pending.get(attempt.fingerprint) === run) this.pending.delete(attempt.fingerprint);
      };
      run.then(forget, forget);
    }
    return run;
  }

  private async run<T>(attempt: CredentialAttempt, exempt: boolean, verify: () => Promise<T>): Promise<T> {
    let outcome: 'passed' | 'failed' | 'error' = 'error';
    try {
      const result = await verify();
      outcome = 'passed';
      return result;
    } catch (error) {
      if (error instanceof TributaryError && error.code === 'unauthorized') outcome = 'failed';
      throw error;
    } finally {
      const now = this.now();
      if (outcome === 'passed') this.remember(attempt.fingerprint, now);
      if (outcome === 'failed') this.markFailed(attempt, now);
      if (outcome === 'failed' && exempt) this.spend(attempt, now);
      if (outcome !== 'failed' && !exempt) this.refund(attempt, now);
    }
  }

  private take(attempt: CredentialAttempt): void {
    const now = this.now();
    const bySource = this.sources.waitSeconds(attempt.source, now);
    const byAccount = attempt.account === undefined || !this.failedLately(attempt, now) ? 0 : this.accounts.waitSeconds(attempt.account, now);
    if (bySource === 0 && byAccount === 0) {
      this.spend(attempt, now);
      return;
    }
    if (bySource > 0) this.logRefusal(this.sources, attempt.source, { via: attempt.via, source: attempt.source }, bySource, now);
    if (byAccount > 0) this.logRefusal(this.accounts, attempt.account!, { via: attempt.via, account: attempt.account }, byAccount, now);
    const seconds = Math.max(bySource, byAccount);
    const whose = bySource > 0 ? 'from this address' : 'for this account';
    throw new TributaryError('too_many_requests', `too many failed credential checks ${whose}; retry in ${seconds} s`, { retryAfterSeconds: seconds });
  }

  private logRefusal(buckets: TokenBuckets, key: string, who: Record<string, string | undefined>, seconds: number, now: number): void {
    const refused = buckets.refused(key, now);
    if (refused === 0) return;
    this.logger.warn({ ...who, refused, failures_per_minute: buckets.limit, retry_after_s: seconds }, 'failed credential checks throttled');
  }

  private spend(attempt: CredentialAttempt, now: number): void {
    this.sources.spend(attempt.source, now);
    if (attempt.account !== undefined) this.accounts.spend(attempt.account, now);
  }

  private refund(attempt: CredentialAttempt, now: number): void {
    this.sources.refund(attempt.source, now);
    if (attempt.account !== undefined) this.accounts.refund(attempt.account, now);
  }

  private markFailed(attempt: CredentialAttempt, now: number): void {
    if (attempt.account === undefined) return;
    const key = `${attempt.account}\u0000${attempt.source}`;
    this.failedFor.delete(key);
    this.failedFor.set(key, now);
    trimOldest(this.failedFor, this.maxKeys);
  }

  private failedLately(attempt: CredentialAttempt, now: number): boolean {
    const at = this.failedFor.get(`${attempt.account}\u0000${attempt.source}`);
    return at !== undefined && now - at < this.windowMs;
  }

  private knownGood(fingerprint: string): boolean {
    const until = this.good.get(fingerprint);
    return until !== undefined && until > this.now();
  }

  private remember(fingerprint: string, now: number): void {
    this.good.delete(fingerprint);
    this.good.set(fingerprint, now + this.goodForMs);
    trimOldest(this.good, this.maxKeys);
    const savedAt = this.saved.get(fingerprint);
    if (!this.store || (savedAt !== undefined && now - savedAt < this.goodForMs / 2)) return;
    this.saved.delete(fingerprint);
    this.saved.set(fingerprint, now);
    trimOldest(this.saved, this.maxKeys);
    // Not awaited: a check never waits on bookkeeping; a lost write costs the exemption after a restart, no more.
    this.store.save(fingerprint, now + this.goodForMs).catch((error: unknown) => {
      this.saved.delete(fingerprint);
      this.logger.warn({ err: error }, 'could not keep a credential that passed for after a restart');
    });
  }
}
