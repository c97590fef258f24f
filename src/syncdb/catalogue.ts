import type pg from 'pg';

/**
 * Views of the whole server that show other tenants' sessions, locks, replication slots and
 * per-database activity (docs/security.md, "What a reader sees of the server").
 */
const VIEWS = [
  'pg_stat_activity',
  'pg_stat_ssl',
  'pg_stat_gssapi',
  'pg_stat_database',
  'pg_stat_database_conflicts',
  'pg_replication_slots',
  'pg_stat_replication_slots',
  'pg_stat_replication',
  'pg_stat_wal_receiver',
  'pg_stat_subscription',
  'pg_stat_subscription_stats',
  'pg_locks',
  'pg_prepared_xacts',
  'pg_stat_progress_analyze',
  'pg_stat_progress_basebackup',
  'pg_stat_progress_cluster',
  'pg_stat_progress_copy',
  'pg_stat_progress_create_index',
  'pg_stat_progress_vacuum',
];

/** The functions behind them, which a role could otherwise call directly with another database's oid or another backend's id. */
const FUNCTIONS = `p.proname ~ '^pg_stat_get_(db|backend)_' OR p.proname IN (
  'pg_stat_get_backend_idset', 'pg_stat_get_activity', 'pg_stat_get_progress_info', 'pg_get_replication_slots',
  'pg_stat_get_replication_slot', 'pg_stat_get_wal_senders', 'pg_stat_get_wal_receiver', 'pg_stat_get_subscription',
  'pg_stat_get_subscription_stats', 'pg_lock_status', 'pg_prepared_xact', 'pg_blocking_pids',
  'pg_safe_snapshot_blocking_pids', 'pg_tablespace_size')`;

/**
 * Takes them from PUBLIC in this database (catalogue privileges are kept per database, even for
 * the catalogues shared by all of them), so the reader, which has no other grant, loses them;
 * the service connects as a superuser or the database's owner and keeps its own view. On a
 * server where the service's role is not a superuser, PostgreSQL answers a warning and changes
 * nothing. Names absent from this server's version are skipped.
 */
export async function hideOtherTenants(client: pg.ClientBase): Promise<void> {
  const { rows: views } = await client.query<{ name: string }>('SELECT n AS name FROM unnest($1::text[]) n WHERE to_regclass(n) IS NOT NULL', [
    VIEWS.map((v) => `pg_catalog.${v}`),
  ]);
  for (const { name } of views) await client.query(`REVOKE SELECT ON ${name} FROM PUBLIC`);
  const { rows: functions } = await client.query<{ signature: string }>(
    `SELECT p.oid::regprocedure::text AS signature FROM pg_proc p
      WHERE p.pronamespace = 'pg_catalog'::regnamespace AND (${FUNCTIONS})`,
  );
  for (const { signature } of functions) await client.query(`REVOKE EXECUTE ON FUNCTION pg_catalog.${signature} FROM PUBLIC`);
}
