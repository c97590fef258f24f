import type pg from 'pg';

/** The delivery path of a sync furthest behind (sql/31_delivery_lag.sql). */
export interface DeliveryBehind {
  /** `kafka`, or `webhook <id>`. */
  path: string;
  /** When the oldest event the path has not delivered yet was logged. */
  since: Date;
  /** A webhook: since when every attempt has failed, and its latest failure in words. */
  failingSince: Date | null;
  lastError: string | null;
}

/**
 * Per sync, the delivery path furthest behind; a sync whose paths have delivered everything
 * (or that has none) is absent. `kafka`: whether the service relays to Kafka. Read for the status views and metrics only, not with every
 * read of a sync: it walks each path's cursor into the event log.
 */
export async function deliveriesBehind(pool: pg.Pool, syncIds: string[], options: { kafka: boolean }): Promise<Map<string, DeliveryBehind>> {
  const behind = new Map<string, DeliveryBehind>();
  if (syncIds.length === 0) return behind;
  const { rows } = await pool.query<{ sync_id: string; path: string; since: Date; failing_since: Date | null; last_error: string | null }>(
    'SELECT sync_id, path, since, failing_since, last_error FROM delivery_behind($1, $2) ORDER BY since',
    [syncIds, options.kafka],
  );
  for (const row of rows) {
    if (behind.has(row.sync_id)) continue;
    behind.set(row.sync_id, { path: row.path, since: row.since, failingSince: row.failing_since, lastError: row.last_error });
  }
  return behind;
}
