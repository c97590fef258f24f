import { withClient } from '../db/sql.ts';

/**
 * What every other session of a database is doing, a line each (state, wait event, seconds
 * since its statement began, the statement's start): said beside a runner taken for stuck, so
 * a lock or a statement that held it shows in the log without a rerun.
 */
export async function busySessions(url: string): Promise<string[]> {
  return withClient(url, async (client) => {
    await client.query("SET statement_timeout = '5s'");
    const { rows } = await client.query<{ state: string | null; wait: string | null; age_s: number | null; query: string }>(
      `SELECT state, wait_event_type || ':' || wait_event AS wait,
              round(extract(epoch FROM clock_timestamp() - query_start))::int AS age_s, left(query, 160) AS query
         FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'
        ORDER BY query_start`,
    );
    return rows.map((r) => `${r.state} ${r.wait ?? '-'} ${r.age_s ?? '?'}s ${r.query.replace(/\s+/g, ' ')}`);
  });
}
