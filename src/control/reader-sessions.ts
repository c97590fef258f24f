import type pg from 'pg';
import type { ReaderLimits } from './reader-limits.ts';

export interface Overruns {
  /** Statements cancelled for running longer than the reader's statement timeout. */
  cancelled: number;
  /** Sessions ended for idling in a transaction longer than the reader's idle timeout. */
  ended: number;
}

/**
 * The two timeouts are only the role's defaults: a session may `SET statement_timeout = 0` for
 * itself, and nothing in PostgreSQL forbids it. So each check also ends what outlived the
 * limits, as PostgreSQL would have: the statement is cancelled, the idle transaction's session
 * ended. A limit of 0 is none. Needs the right to signal the reader's backends (a superuser's).
 */
export async function endOverruns(admin: pg.Client, role: string, limits: ReaderLimits): Promise<Overruns> {
  const { rows } = await admin.query<{ cancelled: number; ended: number }>(
    // CASE, unlike AND, fixes the order: only a running statement is cancelled, only an idle session ended.
    `SELECT count(*) FILTER (WHERE CASE WHEN a.state LIKE 'idle%' THEN false ELSE pg_cancel_backend(a.pid) END)::int AS cancelled,
            count(*) FILTER (WHERE CASE WHEN a.state LIKE 'idle%' THEN pg_terminate_backend(a.pid) ELSE false END)::int AS ended
       FROM pg_stat_activity a
      WHERE a.usename = $1 AND a.backend_type = 'client backend'
        AND ((a.state IN ('active', 'fastpath function call') AND $2::int > 0 AND a.query_start < now() - make_interval(secs => $2::int / 1000.0))
          OR (a.state IN ('idle in transaction', 'idle in transaction (aborted)') AND $3::int > 0
              AND a.state_change < now() - make_interval(secs => $3::int / 1000.0)))`,
    [role, limits.statementTimeoutMs, limits.idleInTransactionTimeoutMs],
  );
  return rows[0] ?? { cancelled: 0, ended: 0 };
}
