import { createHash, timingSafeEqual } from 'node:crypto';
import type { AccountStore } from '../../control/accounts.ts';
import { credentialFingerprint, type FailedCredentials } from '../../credentials/throttle.ts';
import { TributaryError } from '../../errors.ts';

interface CachedCredential {
  accountId: string;
  expires: number;
}

const digestOf = (text: string) => createHash('sha256').update(text, 'utf8').digest();
const MAX_USERNAME_LENGTH = 200;

const unauthorized = (message: string) => new TributaryError('unauthorized', message);

/** `Authorization: Basic base64(user:password)`, or undefined when it is not that. */
export function parseBasicAuth(header: string | undefined): { username: string; password: string } | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/**
 * Checks HTTP basic auth against an account's event username and password (the password is
 * sealed at rest; AccountStore decrypts it), under the failed-credential throttle.
 *
 * Credentials that passed are remembered briefly by their fingerprint (username and password
 * together), so that a busy consumer does not decrypt on every poll. A wrong password can never
 * hit that memory: whether its username exists or not, it costs one query and one decryption.
 */
export class EventCredentials {
  private readonly cache = new Map<string, CachedCredential>();

  constructor(private readonly options: { accounts: AccountStore; throttle: FailedCredentials; cacheMs: number; maxCached?: number }) {}

  /** The account id the credentials belong to; a 401 otherwise (the same one whatever was wrong). */
  async authenticate(header: string | undefined, source: string): Promise<string> {
    const given = parseBasicAuth(header);
    if (!given) throw unauthorized("HTTP basic auth with the account's event username and password is required");
    const fingerprint = credentialFingerprint('event', given.username, given.password);
    const now = Date.now();
    const cached = this.cache.get(fingerprint);
    if (cached && cached.expires > now) return cached.accountId;
    this.cache.delete(fingerprint);
    const named = given.username.length <= MAX_USERNAME_LENGTH;
    const attempt = { via: 'event REST' as const, source, account: named ? given.username : undefined, fingerprint };
    const accountId = await this.options.throttle.check(attempt, async () => {
      const known = named ? await this.options.accounts.eventsCredential(given.username) : undefined;
      const matches = timingSafeEqual(digestOf(given.password), digestOf(known?.password.reveal() ?? '\u0000'));
      if (!known || !matches) throw unauthorized('invalid event username or password');
      return known.accountId;
    });
    this.remember(fingerprint, accountId, now);
    return accountId;
  }

  clear(): void {
    this.cache.clear();
  }

  private remember(fingerprint: string, accountId: string, now: number): void {
    if (this.cache.size >= (this.options.maxCached ?? 10_000)) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(fingerprint, { accountId, expires: now + this.options.cacheMs });
  }
}
