/**
 * What a sync's read-only role may take of the server its database lives on, per sync. The
 * operator changes them (PATCH /api/syncs/:id); the defaults are the control database's
 * column defaults (sql/18_reader_limits.sql), repeated here for code that has no row.
 */
export interface ReaderLimits {
  /** statement_timeout; 0 is none. */
  statementTimeoutMs: number;
  /** idle_in_transaction_session_timeout; 0 is none. */
  idleInTransactionTimeoutMs: number;
  /** temp_file_limit, per server process. */
  tempFileLimitMb: number;
}

export const DEFAULT_READER_LIMITS: ReaderLimits = {
  statementTimeoutMs: 60_000,
  idleInTransactionTimeoutMs: 300_000,
  tempFileLimitMb: 1024,
};

export interface RoleSetting {
  name: string;
  value: string;
  /** Only a superuser (or a role granted SET on it) may set it: the reader cannot change it. */
  superuserOnly: boolean;
}

/**
 * A duration as PostgreSQL keeps it in pg_db_role_setting once written this way: the
 * comparison in restoreReaderRole is of these strings ('5min' is what older releases wrote).
 */
function duration(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000}min`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/**
 * The role's own defaults:
 * - `default_transaction_read_only`, a second wall behind the privileges;
 * - the two timeouts (a reader idle inside a transaction also holds locks that block the swap
 *   of a rebuilt table); the reader may change them for its own session;
 * - `temp_file_limit` and `log_min_error_statement`, which only a superuser may set: the
 *   reader can neither raise the first nor have its failed statements' text written to the
 *   server's log (the error itself still is).
 */
export function readerSettings(limits: ReaderLimits): RoleSetting[] {
  return [
    { name: 'default_transaction_read_only', value: 'on', superuserOnly: false },
    { name: 'idle_in_transaction_session_timeout', value: duration(limits.idleInTransactionTimeoutMs), superuserOnly: false },
    { name: 'statement_timeout', value: duration(limits.statementTimeoutMs), superuserOnly: false },
    { name: 'temp_file_limit', value: `${limits.tempFileLimitMb}MB`, superuserOnly: true },
    { name: 'log_min_error_statement', value: 'panic', superuserOnly: true },
  ];
}
