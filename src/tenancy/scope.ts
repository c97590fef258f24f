import { createHash } from 'node:crypto';
import { AsyncLocalStorage } from 'node:async_hooks';

/** Whose request the code running now serves, as far as it is known yet. */
export interface RequestTenant {
  /**
   * `account:<id>` once authenticated; before that `credential:<digest>` of the credential
   * presented, so that the lookup of one token repeated a thousand times is one tenant's work
   * too. Undefined for the operator, and for work outside any request.
   */
  key?: string;
  /** Control-database clients this request holds for a transaction (FairPool). */
  holding: number;
}

/**
 * The request scope, carried through every await of a request by AsyncLocalStorage: the
 * control pool reads it to share its connections fairly between accounts without every query
 * being handed the account. One instance per process, made in main.ts.
 */
export class TenantScope {
  private readonly storage = new AsyncLocalStorage<RequestTenant>();

  /** Runs `serve` (one request) in a scope of its own. */
  run<T>(serve: () => T): T {
    return this.storage.run({ holding: 0 }, serve);
  }

  /** The scope of the request running now, if any. */
  current(): RequestTenant | undefined {
    return this.storage.getStore();
  }

  /** The request is the account's (undefined: the operator's, which no account limit binds). */
  claimAccount(accountId: string | undefined): void {
    const scope = this.storage.getStore();
    if (scope) scope.key = accountId === undefined ? undefined : `account:${accountId}`;
  }

  /** Before authentication: the request is whoever holds this credential (a token, a cookie, basic auth). */
  claimCredential(credential: string | undefined): void {
    const scope = this.storage.getStore();
    if (scope && credential) scope.key = `credential:${createHash('sha256').update(credential).digest('base64url').slice(0, 22)}`;
  }
}
