import type { Context } from 'koa';
import type { Account, AccountStore } from '../control/accounts.ts';
import { constantTimeEqual } from '../control/secrets.ts';
import { TributaryError } from '../errors.ts';

export type Principal = { kind: 'admin' } | { kind: 'account'; account: Account };

export interface Authenticator {
  (ctx: Context): Promise<Principal>;
}

export function bearerToken(ctx: Context): string {
  const header = ctx.get('authorization');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new TributaryError('unauthorized', 'send Authorization: Bearer <token>');
  return match[1]!;
}

export function authenticator(accounts: AccountStore, adminToken: string): Authenticator {
  return async (ctx) => {
    const token = bearerToken(ctx);
    if (constantTimeEqual(token, adminToken)) return { kind: 'admin' };
    const account = await accounts.findByToken(token);
    if (!account) throw new TributaryError('unauthorized', 'the token is not valid');
    return { kind: 'account', account };
  };
}

export function requireAdmin(principal: Principal): void {
  if (principal.kind !== 'admin') throw new TributaryError('forbidden', 'this needs the operator (admin) token');
}
