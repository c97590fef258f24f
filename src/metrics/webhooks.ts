import type pg from 'pg';
import type { Family, Sample } from './exposition.ts';

/**
 * Webhook destinations per sync and state, read from the control database at scrape time.
 * A disabled destination is sent nothing until its owner enables it again: alert on
 * `tributary_webhook_destinations{state="disabled"} > 0`. Labels: `sync_id`, `state`.
 */
export async function webhookFamilies(pool: pg.Pool): Promise<Family[]> {
  const { rows } = await pool.query<{ sync_id: string; enabled: number; disabled: number }>(
    `SELECT w.sync_id, count(*) FILTER (WHERE w.disabled_at IS NULL)::int AS enabled, count(*) FILTER (WHERE w.disabled_at IS NOT NULL)::int AS disabled
       FROM webhook_destinations w JOIN syncs s ON s.id = w.sync_id AND s.state = 'active'
      GROUP BY w.sync_id
      ORDER BY w.sync_id`,
  );
  const samples: Sample[] = rows.flatMap((row) => [
    { name: 'tributary_webhook_destinations', labels: { sync_id: row.sync_id, state: 'enabled' }, value: row.enabled },
    { name: 'tributary_webhook_destinations', labels: { sync_id: row.sync_id, state: 'disabled' }, value: row.disabled },
  ]);
  return [
    {
      name: 'tributary_webhook_destinations',
      type: 'gauge',
      help: 'Webhook destinations of the sync by state: a disabled one (410 Gone, failing for days, or by request) is sent nothing until enabled again.',
      samples,
    },
  ];
}
