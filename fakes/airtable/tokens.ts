import { hashString, seededId } from './ids.ts';
import type { User } from './model.ts';

export const ALL_SCOPES = ['data.records:read', 'data.records:write', 'schema.bases:read', 'schema.bases:write', 'webhook:manage'];

export interface TokenGrant {
  bases: string[] | '*';
  scopes?: string[];
  /**
   * The user (or service account) the token belongs to: `usr` and 14 characters. Airtable's
   * second rate limit counts all of one user's tokens together. Default: a user of its own.
   */
  user?: string;
}

export interface TokenEntry {
  bases: Set<string> | '*';
  scopes: Set<string>;
  user: User;
}

/** Personal access tokens: each acts as its user, on the bases and scopes it was granted. */
export class TokenRegistry {
  private readonly tokens = new Map<string, TokenEntry>();

  constructor(private readonly users: Map<string, User>) {}

  add(token: string, grant: TokenGrant): User {
    if (typeof token !== 'string' || token === '') throw new Error('a token must be a non-empty string');
    if (grant.user !== undefined && !/^usr[0-9A-Za-z]{14}$/.test(grant.user)) throw new Error(`user id ${grant.user} does not look like usr + 14 characters`);
    const h = hashString(grant.user ?? token);
    const id = grant.user ?? seededId('usr', h, 1);
    const user: User = this.users.get(id) ?? { id, email: `api-user-${h.toString(16)}@example.com`, name: `API user ${h.toString(16).slice(0, 6)}` };
    this.users.set(user.id, user);
    this.tokens.set(token, {
      bases: grant.bases === '*' ? '*' : new Set(grant.bases),
      scopes: new Set(grant.scopes ?? ALL_SCOPES),
      user,
    });
    return user;
  }

  revoke(token: string): void {
    this.tokens.delete(token);
  }

  get(token: string): TokenEntry | undefined {
    return this.tokens.get(token);
  }

  canSee(entry: TokenEntry, baseId: string): boolean {
    return entry.bases === '*' || entry.bases.has(baseId);
  }
}
