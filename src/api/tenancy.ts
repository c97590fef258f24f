import type { Middleware } from 'koa';
import type { TenantCaps } from '../tenancy/limits.ts';
import type { TenantScope } from '../tenancy/scope.ts';
import { type AuthenticateOptions, type Authenticator, type Principal, sessionCookie } from './auth.ts';

/**
 * Each request runs in a scope of its own; until it is authenticated it belongs to the
 * credential it presents (the bearer token, else the console's session cookie).
 */
export function scopeMiddleware(scope: TenantScope): Middleware {
  return (ctx, next) =>
    scope.run(() => {
      scope.claimCredential(ctx.get('authorization') || sessionCookie(ctx));
      return next();
    });
}

/**
 * Once authenticated, the request is its account's: it counts against the cap it names (429
 * past it) and waits for one of the account's working places (the operator's takes none).
 */
export function admittingTenant(authenticate: Authenticator, scope: TenantScope, caps: TenantCaps): Authenticator {
  const admitting = async (ctx: Parameters<Authenticator>[0], options: AuthenticateOptions = {}): Promise<Principal> => {
    const principal = await authenticate(ctx);
    const accountId = principal.kind === 'account' ? principal.account.id : undefined;
    if (accountId !== undefined) caps.request(accountId);
    if (accountId !== undefined && options.capped) scope.untilEnd(caps.enter(options.capped, accountId));
    // A wait mostly waits: the waits cap bounds it, and it takes no working place.
    await scope.admit(accountId, { work: options.capped !== 'waits' });
    return principal;
  };
  return Object.assign(admitting, { principalOf: authenticate.principalOf, adminTokenSha256: authenticate.adminTokenSha256 });
}

/** The 429 of a capped route, for its OpenAPI description. */
export const CAPPED = {
  reads: "Too many of the account's costly reads (syncs list, console tables, connection, history) at once",
  waits: "Too many of the account's waits open at once",
} as const;
