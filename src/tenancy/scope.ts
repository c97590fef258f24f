import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { KeyedLimit, type Release } from './keyed-limit.ts';

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
  admitted: boolean;
  /** What the request gives back when it ends: its working place, its place under a cap. */
  onEnd: Release[];
}

export interface TenantScopeOptions {
  /** Requests of one account worked on at once in this process; the next wait their turn (default 8). */
  requestsPerAccount?: number;
}

/**
 * The request scope, carried through every await of a request by AsyncLocalStorage: the
 * control pool reads it to share its connections fairly between accounts without every query
 * being handed the account. It also holds each account to a few requests worked on at once:
 * a flood of one account's requests then waits in its own line instead of filling the event
 * loop ahead of everyone else's. One instance per process, made in main.ts.
 */
export class TenantScope {
  private readonly storage = new AsyncLocalStorage<RequestTenant>();
  private readonly working: KeyedLimit;

  constructor(options: TenantScopeOptions = {}) {
    this.working = new KeyedLimit(options.requestsPerAccount ?? 8);
  }

  /** Runs `serve` (one request) in a scope of its own; what it holds is given back when it ends. */
  async run<T>(serve: () => Promise<T>): Promise<T> {
    const tenant: RequestTenant = { holding: 0, admitted: false, onEnd: [] };
    try {
      return await this.storage.run(tenant, serve);
    } finally {
      for (const release of tenant.onEnd.splice(0)) release();
    }
  }

  /**
   * Starts an account's background work (a sync's webhook delivery, backfills, Kafka relay):
   * whatever `start` sets going runs as the account's, so the control pool gives it the
   * account's share of connections, which its requests share too. Without it, one account's
   * deliveries to failing destinations held the pool and every tenant's requests waited.
   */
  runAs<T>(accountId: string, start: () => T): T {
    return this.storage.run({ key: `account:${accountId}`, holding: 0, admitted: true, onEnd: [] }, start);
  }

  /** The scope of the request running now, if any. */
  current(): RequestTenant | undefined {
    return this.storage.getStore();
  }

  /** Before authentication: the request is whoever holds this credential (a token, a cookie, basic auth). */
  claimCredential(credential: string | undefined): void {
    const scope = this.storage.getStore();
    if (scope && credential) scope.key = `credential:${createHash('sha256').update(credential).digest('base64url').slice(0, 22)}`;
  }

  /**
   * Authenticated: the request is the account's (undefined: the operator's, which no account
   * limit binds). With `work`, it first waits for one of the account's working places; a long
   * poll or a wait, which mostly waits, takes none (their own caps bound them).
   */
  async admit(accountId: string | undefined, options: { work: boolean }): Promise<void> {
    const scope = this.storage.getStore();
    if (!scope || scope.admitted) return;
    scope.admitted = true;
    scope.key = accountId === undefined ? undefined : `account:${accountId}`;
    if (accountId !== undefined && options.work) scope.onEnd.push(await this.working.acquire(accountId));
  }

  /** Gives `release` back when the request running now ends. */
  untilEnd(release: Release): void {
    const scope = this.storage.getStore();
    if (scope) scope.onEnd.push(release);
    else release();
  }
}
