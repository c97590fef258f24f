import { dropIdleAfterTimeout } from '../db/drop-idle.ts';
import type { Logger } from '../log.ts';
import { FairPool } from '../tenancy/fair-pool.ts';
import type { TenantScope } from '../tenancy/scope.ts';
import { guardPool } from '../db/pool.ts';

/** Connections of the control-database pool, in each process. */
export const CONTROL_POOL_SIZE = 10;

/**
 * A control-database statement unanswered this long fails, and its connection is dropped.
 * Over a path that stops passing bytes without closing, a statement would otherwise wait for
 * as long as TCP retries (a quarter of an hour), and so would every request and sync behind
 * it; the longest statements here (a quota decision waiting for its lock, a large batch of
 * events) take seconds at most.
 */
export const CONTROL_DB_QUERY_TIMEOUT_MS = 30_000;
/** A control-database session idle inside a transaction this long is ended by the server (our transactions take milliseconds). */
export const IDLE_IN_TRANSACTION_MS = 60_000;
/** The server's statement_timeout is this much shorter than the client's deadline. */
const SERVER_FIRST_MS = 2000;
/** A new control-database connection not made in this long fails (the same hung path, at connect). */
const CONTROL_DB_CONNECT_TIMEOUT_MS = 10_000;

export interface ControlPoolOptions {
  url: string;
  scope: TenantScope;
  /** Connections one tenant's requests may hold at once. */
  perTenant: number;
  queryTimeoutMs?: number;
  idleInTransactionMs?: number;
  logger: Logger;
}

/** The process's pool of control-database connections, shared fairly between tenants (FairPool). */
export function controlPool(options: ControlPoolOptions): FairPool {
  const queryTimeoutMs = options.queryTimeoutMs ?? CONTROL_DB_QUERY_TIMEOUT_MS;
  const pool = new FairPool(
    {
      connectionString: options.url,
      max: CONTROL_POOL_SIZE,
      query_timeout: queryTimeoutMs,
      // The server gives up first, so a statement the client stopped waiting for (a lock wait,
      // not a hung path) cannot still commit after its caller was told it failed.
      statement_timeout: Math.max(1000, queryTimeoutMs - SERVER_FIRST_MS),
      // A client cut off mid-transaction (a hung path) would otherwise hold its row locks for
      // as long as its session lives: the server ends the session instead.
      idle_in_transaction_session_timeout: options.idleInTransactionMs ?? IDLE_IN_TRANSACTION_MS,
      connectionTimeoutMillis: Math.min(CONTROL_DB_CONNECT_TIMEOUT_MS, queryTimeoutMs),
    },
    { scope: options.scope, perTenant: Math.min(options.perTenant, CONTROL_POOL_SIZE) },
  );
  dropIdleAfterTimeout(pool);
  return guardPool(pool, (err) => options.logger.warn({ err }, 'idle control-database connection failed'));
}
