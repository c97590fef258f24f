import type pg from 'pg';
import type { Family, Sample } from './exposition.ts';

/**
 * What comparisons with the upstream found (sql/36_drift.sql): the drift of the last 24 hours
 * by kind, when tables were last compared, and how long the audit's last round took. Active
 * syncs only. By `table` only where its names are the upstream's own (a Stripe sync's object
 * types); a table a customer named (an Airtable base's) is no label, as no name of theirs is
 * (syncs.ts): such a sync's drift is summed, and its oldest comparison shown, with `table=""`.
 */
export async function driftFamilies(pool: pg.Pool): Promise<Family[]> {
  const tbl = (alias: string) => `CASE WHEN s.kind = 'stripe' THEN ${alias}.tbl ELSE '' END`;
  const { rows: drift } = await pool.query<{ sync_id: string; tbl: string; missing: number; differing: number; extra: number }>(
    `SELECT d.sync_id, ${tbl('d')} AS tbl, sum(d.missing)::int AS missing, sum(d.differing)::int AS differing, sum(d.extra)::int AS extra
       FROM sync_drift d JOIN syncs s ON s.id = d.sync_id AND s.state = 'active'
      WHERE d.found_at > now() - interval '24 hours' GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  const { rows: compared } = await pool.query<{ sync_id: string; tbl: string; at: number }>(
    `SELECT c.sync_id, ${tbl('c')} AS tbl, extract(epoch FROM min(c.compared_at))::float8 AS at
       FROM sync_comparisons c JOIN syncs s ON s.id = c.sync_id AND s.state = 'active' GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  const { rows: rounds } = await pool.query<{ sync_id: string; ms: string }>(
    `SELECT a.sync_id, a.last_round_ms AS ms FROM sync_audits a JOIN syncs s ON s.id = a.sync_id AND s.state = 'active'
      WHERE a.last_round_ms IS NOT NULL ORDER BY a.sync_id`,
  );
  const rowsSamples: Sample[] = drift.flatMap((d) =>
    (['missing', 'differing', 'extra'] as const).map((kind) => ({
      name: 'tributary_sync_drift_rows',
      labels: { sync_id: d.sync_id, table: d.tbl, drift: kind },
      value: d[kind],
    })),
  );
  return [
    {
      name: 'tributary_sync_drift_rows',
      type: 'gauge',
      help: 'Rows found unlike the upstream and fixed in the last 24 hours, by table: missing, differing or extra (the audit, the sweeps).',
      samples: rowsSamples,
    },
    {
      name: 'tributary_sync_table_compared_timestamp_seconds',
      type: 'gauge',
      help: 'When the table was last compared whole with the upstream (Unix time); table="": the oldest of the sync\'s tables.',
      samples: compared.map((c) => ({ name: 'tributary_sync_table_compared_timestamp_seconds', labels: { sync_id: c.sync_id, table: c.tbl }, value: c.at })),
    },
    {
      name: 'tributary_sync_audit_round_seconds',
      type: 'gauge',
      help: "How long the audit's last whole round took, in seconds.",
      samples: rounds.map((r) => ({ name: 'tributary_sync_audit_round_seconds', labels: { sync_id: r.sync_id }, value: Number(r.ms) / 1000 })),
    },
  ];
}
