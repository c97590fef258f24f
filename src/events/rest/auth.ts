import { createHash, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import type { AccountStore } from '../../control/accounts.ts';
import { TributaryError } from '../../errors.ts';

interface CachedCredential {
  accountId: string;
  /** SHA-256 of the password: compared in constant time, never kept in clear. */
  digest: Buffer;
  expires: number;
}

const digestOf = (text: string) => createHash('sha256').update(text, 'utf8').digest();
/** Compared against when the username is unknown, so that both paths do the same work. */
const NO_ACCOUNT_DIGEST = digestOf('no account has this username');
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
 * sealed at rest; AccountStore decrypts it). Checked passwords are cached briefly as digests
 * so that a busy consumer does not decrypt on every poll.
 */
export class EventCredentials {
  private readonly cache = new Map<string, CachedCredential>();

  constructor(private readonly options: { pool: pg.Pool; accounts: AccountStore; cacheMs: number; maxCached?: number }) {}

  /** The account id the credentials belong to; a 401 otherwise (the same one whatever was wrong). */
  async authenticate(header: string | undefined): Promise<string> {
    const given = parseBasicAuth(header);
    if (!given) throw unauthorized("HTTP basic auth with the account's event username and password is required");
    const known = given.username.length <= MAX_USERNAME_LENGTH ? await this.lookup(given.username) : undefined;
    const matches = timingSafeEqual(digestOf(given.password), known?.digest ?? NO_ACCOUNT_DIGEST);
    if (!known || !matches) throw unauthorized('invalid event username or password');
    return known.accountId;
  }

  clear(): void {
    this.cache.clear();
  }

  private async lookup(username: string): Promise<CachedCredential | undefined> {
    const now = Date.now();
    const cached = this.cache.get(username);
    if (cached && cached.expires > now) return cached;
    this.cache.delete(username);
    const { rows } = await this.options.pool.query<{ id: string }>('SELECT id FROM accounts WHERE events_username = $1', [username]);
    const accountId = rows[0]?.id;
    if (!accountId) return undefined; // misses are not cached: a new account works at once
    const password = await this.options.accounts.eventsPassword(accountId);
    if (!password) return undefined;
    const entry = { accountId, digest: digestOf(password.reveal()), expires: now + this.options.cacheMs };
    if (this.cache.size >= (this.options.maxCached ?? 10_000)) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(username, entry);
    return entry;
  }
}
