import { DRIFT_COLUMN, type DriftRow, driftStatus } from './drift.ts';
import type { SyncKind, SyncSettings } from './settings.ts';
import type { IncompleteList } from './status-fields.ts';
import type { SyncRecord, SyncState } from './syncs.ts';

/** A row of `syncs` as the store reads it, and how it becomes a SyncRecord. */
export interface SyncRow {
  id: string;
  account_id: string;
  kind: SyncKind;
  base_id: string | null;
  upstream_account_id: string | null;
  settings: SyncSettings;
  state: SyncState;
  keep_database: boolean;
  database_name: string;
  database_role: string;
  schema: string;
  database_of: string | null;
  custom_server: boolean;
  server_id: string | null;
  region: string | null;
  started_at: Date | null;
  completed_at: Date | null;
  duration_last_s: number | null;
  last_error: string | null;
  last_error_at: Date | null;
  last_error_kind: 'transient' | 'fatal' | 'disk_full' | null;
  duration_usual_s: number | null;
  slowed_by: string | null;
  slowed_at: Date | null;
  confirmed_through: Date | null;
  paced_cycle_s: number | null;
  incomplete: IncompleteList[];
  upstream_name: string | null;
  upstream_warnings: string[];
  progress: unknown;
  created_at: Date;
  updated_at: Date;
  events_logged: string | null;
  slot_lag_bytes: string | null;
  slot_retention: { retained: number | null; safe: number | null; status: string | null } | null;
  slot_gap: {
    id: string;
    reason: string;
    detail: string;
    lost_at: string;
    recovered_at: string | null;
    backfill_id: string;
    backfill_state: string | null;
    reread_at: string | null;
  } | null;
  drift: DriftRow;
  lag_at: Date | null;
  logged_through: Date | null;
  reader_connection_limit: number;
  reader_statement_timeout_ms: number;
  reader_idle_in_transaction_timeout_ms: number;
  reader_temp_file_limit_mb: number;
}

export const columns = `id, account_id, kind, base_id, upstream_account_id, settings, state, keep_database,
  database_name, database_role, schema, database_of, database_server_enc IS NOT NULL AS custom_server, server_id,
  (SELECT region FROM servers v WHERE v.id = syncs.server_id) AS region,
  started_at, completed_at, extract(epoch FROM duration_last)::float8 AS duration_last_s,
  last_error, last_error_at, last_error_kind, extract(epoch FROM duration_usual)::float8 AS duration_usual_s, slowed_by, slowed_at, confirmed_through, paced_cycle_s, incomplete,
  upstream_name, upstream_warnings, progress, created_at, updated_at, reader_connection_limit,
  reader_statement_timeout_ms, reader_idle_in_transaction_timeout_ms, reader_temp_file_limit_mb,
  (SELECT seq FROM decoder_progress d WHERE d.sync_id = syncs.id) AS events_logged,
  (SELECT slot_lag_bytes FROM decoder_progress d WHERE d.sync_id = syncs.id) AS slot_lag_bytes,
  (SELECT jsonb_build_object('retained', slot_retained_bytes, 'safe', slot_safe_bytes, 'status', slot_wal_status)
     FROM decoder_progress d WHERE d.sync_id = syncs.id) AS slot_retention,
  (SELECT jsonb_build_object('id', g.id, 'reason', g.reason, 'detail', g.detail, 'lost_at', g.lost_at, 'recovered_at', g.recovered_at,
          'backfill_id', g.backfill_id, 'backfill_state', b.state, 'reread_at', b.finished_at)
     FROM slot_gaps g LEFT JOIN backfills b ON b.id = g.backfill_id WHERE g.sync_id = syncs.id ORDER BY g.lost_at DESC LIMIT 1) AS slot_gap,
  ${DRIFT_COLUMN},
  (SELECT lag_at FROM decoder_progress d WHERE d.sync_id = syncs.id) AS lag_at,
  (SELECT logged_through FROM decoder_progress d WHERE d.sync_id = syncs.id) AS logged_through`;

export const toRecord = (row: SyncRow): SyncRecord => ({
  id: row.id,
  accountId: row.account_id,
  kind: row.kind,
  baseId: row.base_id,
  upstreamAccountId: row.upstream_account_id,
  settings: row.settings,
  state: row.state,
  keepDatabase: row.keep_database,
  databaseName: row.database_name,
  databaseRole: row.database_role,
  schema: row.schema,
  databaseOf: row.database_of,
  customServer: row.custom_server,
  serverId: row.server_id,
  region: row.region,
  status: {
    startedAt: row.started_at,
    completedAt: row.completed_at,
    durationLastSeconds: row.duration_last_s,
    lastError: row.last_error,
    lastErrorAt: row.last_error_at,
    lastErrorKind: row.last_error_kind,
    durationUsualSeconds: row.duration_usual_s,
    progress: row.progress,
    slowedBy: row.slowed_by,
    slowedAt: row.slowed_at,
    confirmedThrough: row.confirmed_through,
    pacedCycleSeconds: row.paced_cycle_s,
    incomplete: row.incomplete,
    events: {
      reportedAt: row.lag_at,
      slotLagBytes: row.slot_lag_bytes === null ? null : Number(row.slot_lag_bytes),
      loggedThrough: row.logged_through,
      slot: row.slot_retention && {
        retainedBytes: row.slot_retention.retained,
        safeBytes: row.slot_retention.safe,
        walStatus: row.slot_retention.status,
      },
    },
    slotGap: row.slot_gap && {
      id: row.slot_gap.id,
      reason: row.slot_gap.reason,
      detail: row.slot_gap.detail,
      lostAt: new Date(row.slot_gap.lost_at),
      recoveredAt: row.slot_gap.recovered_at === null ? null : new Date(row.slot_gap.recovered_at),
      backfillId: row.slot_gap.backfill_id,
      backfillState: row.slot_gap.backfill_state,
      rereadAt: row.slot_gap.reread_at === null ? null : new Date(row.slot_gap.reread_at),
    },
    drift: driftStatus(row.drift),
  },
  upstreamName: row.upstream_name,
  warnings: row.upstream_warnings,
  decoder: { eventsLogged: Number(row.events_logged ?? 0), slotLagBytes: row.slot_lag_bytes === null ? null : Number(row.slot_lag_bytes) },
  readerConnectionLimit: row.reader_connection_limit,
  readerLimits: {
    statementTimeoutMs: row.reader_statement_timeout_ms,
    idleInTransactionTimeoutMs: row.reader_idle_in_transaction_timeout_ms,
    tempFileLimitMb: row.reader_temp_file_limit_mb,
  },
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});
