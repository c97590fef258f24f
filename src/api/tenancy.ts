import type { Middleware } from 'koa';
import type { CappedKind, TenantCaps } from '../tenancy/limits.ts';
import type { TenantScope } from '../tenancy/scope.ts';
import { type Authenticator, type Principal, sessionCookie } from './auth.ts';

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

/** Once authenticated, the request is its account's (the operator's belongs to no account). */
export function claimingTenant(authenticate: Authenticator, scope: TenantScope): Authenticator {
  const claiming = async (ctx: Parameters<Authenticator>[0]): Promise<Principal> => {
    const principal = await authenticate(ctx);
    scope.claimAccount(principal.kind === 'account' ? principal.account.id : undefined);
    return principal;
  };
  return Object.assign(claiming, { principalOf: authenticate.principalOf, adminTokenSha256: authenticate.adminTokenSha256 });
}

/** Runs `work` within the principal's account cap of `kind` (429 past it); the operator is not capped. */
export function withinCap<T>(caps: TenantCaps | undefined, kind: CappedKind, principal: Principal, work: () => Promise<T>): Promise<T> {
  if (!caps) return work();
  return caps.within(kind, principal.kind === 'account' ? principal.account.id : undefined, work);
}

/** The 429 of a capped route, for its OpenAPI description. */
export const CAPPED = {
  reads: "Too many of the account's costly reads (syncs list, console tables, connection, history) at once",
  waits: "Too many of the account's waits open at once",
} as const;
