import type { Context } from 'koa';
import type { Account, AccountStore } from '../control/accounts.ts';
import type { ConsoleSessions } from '../control/console-sessions.ts';
import { constantTimeEqual, hashToken } from '../control/secrets.ts';
import { credentialFingerprint, type CredentialInterface, type FailedCredentials } from '../credentials/throttle.ts';
import { TributaryError } from '../errors.ts';
import { clientAddress } from '../http/client-address.ts';
import type { CappedKind } from '../tenancy/limits.ts';

export type Principal = { kind: 'admin' } | { kind: 'account'; account: Account };

export interface AuthenticateOptions {
  /** The account cap the request counts against from now until it ends (a 429 past it). */
  capped?: CappedKind;
}

export interface Authenticator {
  (ctx: Context, options?: AuthenticateOptions): Promise<Principal>;
  /** The principal a raw token stands for (the console's sign-in), under the failed-credential throttle. */
  principalOf?(token: string, from: TokenSource): Promise<Principal>;
  /** SHA-256 (hex) of the admin token: the operator's console sessions end when it changes. */
  adminTokenSha256?: string;
}

/** Where a token was presented, for the failed-credential throttle. */
export interface TokenSource {
  via: CredentialInterface;
  source: string;
}

/** The client's address, as the API's first middleware worked it out (see createApiApp). */
export const requestSource = (ctx: Context): string =>
  (ctx.state.clientAddress as string | undefined) ?? clientAddress({ remoteAddress: ctx.req.socket.remoteAddress, forwardedFor: undefined, reverseProxies: 0 });

export function bearerToken(ctx: Context): string {
  const header = ctx.get('authorization');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new TributaryError('unauthorized', 'send Authorization: Bearer <token>');
  return match[1]!;
}

/**
 * API tokens and the operator token. A token names no account (it is random through and
 * through), so failed ones are throttled per client address only. Every wrong token costs the
 * same: a constant-time comparison with the operator's, then one lookup by the token's hash.
 */
export function authenticator(accounts: AccountStore, adminToken: string, throttle: FailedCredentials): Authenticator {
  const principalOf = (token: string, from: TokenSource): Promise<Principal> =>
    throttle.check({ ...from, fingerprint: credentialFingerprint('token', token) }, async () => {
      if (constantTimeEqual(token, adminToken)) return { kind: 'admin' };
      const account = await accounts.findByToken(token);
      if (!account) throw new TributaryError('unauthorized', 'the token is not valid');
      return { kind: 'account', account };
    });
  const authenticate = async (ctx: Context) => principalOf(bearerToken(ctx), { via: 'management API', source: requestSource(ctx) });
  return Object.assign(authenticate, { principalOf, adminTokenSha256: hashToken(adminToken) });
}

/** The console's session cookie: `__Host-` prefixed when served over https (the prefix needs Secure). */
export const sessionCookieName = (secure: boolean) => (secure ? '__Host-tributary_session' : 'tributary_session');
export const CSRF_HEADER = 'x-csrf-token';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * This server's origin as the browser sees it: TRIBUTARY_PUBLIC_URL's when set (behind a
 * reverse proxy), else the request's own (Koa 3's ctx.origin is the Origin header instead).
 */
export const ownOrigin = (ctx: Context): string => (ctx.state.publicOrigin as string | undefined) ?? `${ctx.protocol}://${ctx.host}`;

/** True when the browser reaches this server over https (the cookie is then Secure and __Host-). */
export const servedSecurely = (ctx: Context) => ownOrigin(ctx).startsWith('https:');

/**
 * The console session's id from its cookie: under https only `__Host-tributary_session`,
 * which the browser keeps to this very origin; the unprefixed name could be planted by a
 * sibling host or over plain http.
 */
export const sessionCookie = (ctx: Context): string | undefined => ctx.cookies.get(sessionCookieName(servedSecurely(ctx)));

/**
 * Refuses requests another site made the browser send: the fetch metadata (Sec-Fetch-Site)
 * and the Origin header, where the browser sends them, must name this very origin.
 */
export function assertSameOrigin(ctx: Context): void {
  const site = ctx.get('sec-fetch-site');
  const navigation = site === 'none' && SAFE_METHODS.has(ctx.method);
  if (site && site !== 'same-origin' && !navigation) throw new TributaryError('forbidden', 'a cross-site request cannot use the console session');
  const origin = ctx.get('origin');
  if (origin && origin !== ownOrigin(ctx)) throw new TributaryError('forbidden', 'a cross-origin request cannot use the console session');
}

/**
 * Bearer tokens, or else the console's session cookie. A cookie counts only for same-origin
 * requests, and a state-changing one must also carry the session's CSRF token in X-CSRF-Token
 * (the cookie is SameSite=Strict besides). An Authorization header always wins over a cookie.
 */
export function withConsoleSessions(bearer: Authenticator, sessions: ConsoleSessions): Authenticator {
  const authenticate = async (ctx: Context): Promise<Principal> => {
    const id = ctx.get('authorization') ? undefined : sessionCookie(ctx);
    if (!id) return bearer(ctx);
    assertSameOrigin(ctx);
    const session = await sessions.find(id, bearer.adminTokenSha256);
    if (!session) throw new TributaryError('unauthorized', 'the console session has ended; sign in again');
    if (!SAFE_METHODS.has(ctx.method) && !constantTimeEqual(ctx.get(CSRF_HEADER), session.csrfToken)) {
      throw new TributaryError('forbidden', "send the console session's CSRF token in X-CSRF-Token");
    }
    return session.principal;
  };
  return Object.assign(authenticate, { principalOf: bearer.principalOf, adminTokenSha256: bearer.adminTokenSha256 });
}

export function requireAdmin(principal: Principal): void {
  if (principal.kind !== 'admin') throw new TributaryError('forbidden', 'this needs the operator (admin) token');
}
