import type { SyncStatusFields } from './syncs.ts';

export type Indicator = 'normal' | 'yellow' | 'red';

export interface SyncStatus {
  indicator: Indicator;
  started_at: string | null;
  completed_at: string | null;
  duration_last: number | null;
  lag_seconds: number | null;
  last_error: string | null;
  progress: unknown;
}

/** How long a sync may keep failing before yellow turns red. */
export const RED_AFTER_MS = 5 * 60_000;

/**
 * The indicator rule:
 * - normal: the last cycle succeeded (or none has failed yet);
 * - yellow: the latest attempt failed, but for less than five minutes;
 * - red: failing for five minutes or more with no completed cycle since.
 */
export function indicatorOf(status: SyncStatusFields, now: Date): Indicator {
  if (!status.lastError || !status.lastErrorAt) return 'normal';
  const lastGood = status.completedAt?.getTime() ?? 0;
  if (lastGood >= status.lastErrorAt.getTime()) return 'normal';
  const failingSince = Math.max(lastGood, status.startedAt?.getTime() ?? status.lastErrorAt.getTime());
  return now.getTime() - failingSince >= RED_AFTER_MS ? 'red' : 'yellow';
}

/**
 * Lag is the age of the oldest data the database may still show: the time since the
 * last completed cycle began (its completion time minus its duration).
 */
function lagSeconds(status: SyncStatusFields, now: Date): number | null {
  if (!status.completedAt) return null;
  const began = status.completedAt.getTime() - (status.durationLastSeconds ?? 0) * 1000;
  return Math.max(0, Math.round((now.getTime() - began) / 100) / 10);
}

export function statusOf(status: SyncStatusFields, now = new Date()): SyncStatus {
  return {
    indicator: indicatorOf(status, now),
    started_at: status.startedAt?.toISOString() ?? null,
    completed_at: status.completedAt?.toISOString() ?? null,
    duration_last: status.durationLastSeconds,
    lag_seconds: lagSeconds(status, now),
    last_error: status.lastError,
    progress: status.progress ?? null,
  };
}
