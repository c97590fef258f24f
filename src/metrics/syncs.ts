import type pg from 'pg';
import { deliveriesBehind } from '../control/delivery-lag.ts';
import { type StatusBounds, slotShare, statusOf } from '../control/status.ts';
import type { Family, Sample } from './exposition.ts';

interface SyncMetricRow {
  id: string;
  kind: string;
  started_at: Date | null;
  completed_at: Date | null;
  duration_last_s: number | null;
  confirmed_through: Date | null;
  events_logged: string | null;
  slot_lag_bytes: string | null;
  slot_retained_bytes: string | null;
  slot_safe_bytes: string | null;
  lag_at: Date | null;
  logged_through: Date | null;
  upstream_429s: string;
}

/**
 * Per-sync values, read from the control database at scrape time, so every process's syncs
 * (and decoders) show up whichever process answers the scrape. Labels: `sync_id`, `kind`;
 * nothing else about a sync (no names, keys or URLs) is exposed.
 */
export async function syncFamilies(pool: pg.Pool, options: { kafka: boolean; statusBounds?: Partial<StatusBounds> }, now = new Date()): Promise<Family[]> {
  const { rows } = await pool.query<SyncMetricRow>(
    `SELECT s.id, s.kind, s.started_at, s.completed_at, extract(epoch FROM s.duration_last)::float8 AS duration_last_s,
            s.confirmed_through, d.seq AS events_logged, d.slot_lag_bytes, d.slot_retained_bytes, d.slot_safe_bytes, d.lag_at, d.logged_through, s.upstream_429s
       FROM syncs s LEFT JOIN decoder_progress d ON d.sync_id = s.id
      WHERE s.state = 'active'
      ORDER BY s.id`,
  );
  const behind = await deliveriesBehind(
    pool,
    rows.map((row) => row.id),
    options,
  );
  const deliveriesLag: Sample[] = [];
  const lag: Sample[] = [];
  const duration: Sample[] = [];
  const logged: Sample[] = [];
  const slotLag: Sample[] = [];
  const slotRetained: Sample[] = [];
  const slotShares: Sample[] = [];
  const eventsLag: Sample[] = [];
  const refused: Sample[] = [];
  for (const row of rows) {
    const labels = { sync_id: row.id, kind: row.kind };
    // The same rule as the sync's view (status.lag_seconds): the age of the oldest data it may show.
    const status = statusOf(
      {
        startedAt: row.started_at,
        completedAt: row.completed_at,
        durationLastSeconds: row.duration_last_s,
        confirmedThrough: row.confirmed_through,
        lastError: null,
        lastErrorAt: null,
        lastErrorKind: null,
        durationUsualSeconds: null,
        progress: null,
        events: {
          reportedAt: row.lag_at,
          slotLagBytes: row.slot_lag_bytes === null ? null : Number(row.slot_lag_bytes),
          loggedThrough: row.logged_through,
        },
        deliveries: behind.get(row.id) ?? null,
      },
      now,
      options.statusBounds,
    );
    if (status.lag_seconds !== null) lag.push({ name: 'tributary_sync_lag_seconds', labels, value: status.lag_seconds });
    if (status.events_lag_seconds !== null) eventsLag.push({ name: 'tributary_sync_events_lag_seconds', labels, value: status.events_lag_seconds });
    deliveriesLag.push({ name: 'tributary_sync_deliveries_lag_seconds', labels, value: status.deliveries_lag_seconds ?? 0 });
    if (row.duration_last_s !== null) duration.push({ name: 'tributary_sync_cycle_duration_seconds', labels, value: row.duration_last_s });
    logged.push({ name: 'tributary_sync_events_logged_total', labels, value: Number(row.events_logged ?? 0) });
    if (row.slot_lag_bytes !== null) slotLag.push({ name: 'tributary_sync_slot_lag_bytes', labels, value: Number(row.slot_lag_bytes) });
    if (row.slot_retained_bytes !== null) {
      const retained = Number(row.slot_retained_bytes);
      slotRetained.push({ name: 'tributary_sync_slot_retained_wal_bytes', labels, value: retained });
      // The same share as the status's.
      const share = slotShare({ retainedBytes: retained, safeBytes: row.slot_safe_bytes === null ? null : Number(row.slot_safe_bytes), walStatus: null });
      if (share !== null) slotShares.push({ name: 'tributary_sync_slot_wal_bound_share', labels, value: share });
    }
    refused.push({ name: 'tributary_sync_upstream_429_total', labels, value: Number(row.upstream_429s) });
  }
  return [
    {
      name: 'tributary_sync_lag_seconds',
      type: 'gauge',
      help: 'Seconds since the latest complete pass began, by any path (the age of the oldest change the database may still miss).',
      samples: lag,
    },
    { name: 'tributary_sync_cycle_duration_seconds', type: 'gauge', help: 'Duration of the last completed sync cycle, in seconds.', samples: duration },
    { name: 'tributary_sync_events_logged_total', type: 'counter', help: 'Events the decoder has made durable in the event log.', samples: logged },
    {
      name: 'tributary_sync_events_lag_seconds',
      type: 'gauge',
      help: 'Seconds since the oldest committed change that may not be an event yet (0 while the event log is caught up); the status turns yellow at 120.',
      samples: eventsLag,
    },
    {
      name: 'tributary_sync_deliveries_lag_seconds',
      type: 'gauge',
      help: 'Seconds since the oldest logged event that a delivery path (the Kafka relay, an enabled webhook) has not delivered yet (0 when all have); the status turns yellow at 120.',
      samples: deliveriesLag,
    },
    { name: 'tributary_sync_slot_lag_bytes', type: 'gauge', help: "Bytes of WAL the server holds ahead of the sync's replication slot.", samples: slotLag },
    {
      name: 'tributary_sync_slot_retained_wal_bytes',
      type: 'gauge',
      help: "Bytes of WAL the server keeps for the sync's replication slot (from its restart_lsn).",
      samples: slotRetained,
    },
    {
      name: 'tributary_sync_slot_wal_bound_share',
      type: 'gauge',
      help: "Share of what the server lets a slot keep (max_slot_wal_keep_size) that the sync's slot keeps; the status turns yellow at 0.5. Absent without a bound.",
      samples: slotShares,
    },
    { name: 'tributary_sync_upstream_429_total', type: 'counter', help: "Upstream 429 answers to the sync's own requests.", samples: refused },
  ];
}
