import type { DeliveryBehind } from './delivery-lag.ts';
import type { DriftStatus } from './drift.ts';

/** What the status of a sync (status.ts) is made of, as the control database holds it. */
export interface SyncStatusFields {
  startedAt: Date | null;
  completedAt: Date | null;
  durationLastSeconds: number | null;
  lastError: string | null;
  lastErrorAt: Date | null;
  lastErrorKind: 'transient' | 'fatal' | 'disk_full' | null;
  durationUsualSeconds: number | null;
  progress: unknown;
  /** An upstream limit shared with other syncs that held this one back, in words, and when last seen. */
  slowedBy?: string | null;
  slowedAt?: Date | null;
  /** The start of the latest pass known complete (a feed read, a capture read, a cycle): the database holds what upstream had then. */
  confirmedThrough?: Date | null;
  /** Seconds a paced cycle is spread over (see sql/22_sweep_pace.sql); null: full pace. */
  pacedCycleSeconds?: number | null;
  /** Lists the sync cannot read completely right now, and why (see sql/23_incomplete_lists.sql). */
  incomplete?: IncompleteList[];
  /** The decoder's latest report (sql/30_events_lag.sql): when, the slot's lag in bytes, and how far the log reaches. */
  events?: { reportedAt: Date | null; slotLagBytes: number | null; loggedThrough: Date | null; slot?: SlotRetention | null };
  /**
   * The delivery path (Kafka relay, webhooks) furthest behind, read apart (delivery-lag.ts):
   * null when every path has delivered everything; absent when not read.
   */
  deliveries?: DeliveryBehind | null;
  /** The sync's latest lost slot and its re-read (sql/33_slot_gaps.sql); null: none. */
  slotGap?: SlotGap | null;
  /** What comparisons with the upstream found and fixed (sql/36_drift.sql); absent when not read. */
  drift?: DriftStatus;
}

/**
 * A replication slot lost and replaced: why, when it was noticed, when the new slot was made
 * (null: not yet), and the backfill that reads every collection again after the gap marker.
 */
export interface SlotGap {
  id: string;
  reason: string;
  detail: string;
  lostAt: Date;
  recoveredAt: Date | null;
  backfillId: string;
  /** The re-read's state (null: not made yet), and when it finished. */
  backfillState: string | null;
  rereadAt: Date | null;
}

/** A list the sync cannot read completely right now: the upstream's name for it, its table, why, and since when (ISO 8601). */
export interface IncompleteList {
  list: string;
  table: string;
  reason: string;
  since: string;
}

/**
 * The sync's replication slot's hold on its server's WAL, as the decoder last read it
 * (sql/32_slot_retention.sql): what it keeps, what may still be written before PostgreSQL
 * drops WAL it needs (null: the server has no bound), and pg_replication_slots' wal_status.
 */
export interface SlotRetention {
  retainedBytes: number | null;
  safeBytes: number | null;
  walStatus: string | null;
}
