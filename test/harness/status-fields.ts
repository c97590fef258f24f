import type { SyncStatusFields } from '../../src/control/status-fields.ts';

/** The instant the status tests judge at, and a time that long before it. */
export const NOW = new Date('2026-12-04T12:00:00Z');
export const ago = (ms: number) => new Date(NOW.getTime() - ms);

/** A healthy sync's status fields at NOW: a cycle completed a minute ago, a pass 2 s ago, no error; `more` on top. */
export function healthyStatus(more: Partial<SyncStatusFields> = {}): SyncStatusFields {
  return {
    startedAt: ago(70_000),
    completedAt: ago(60_000),
    durationLastSeconds: 10,
    lastError: null,
    lastErrorAt: null,
    lastErrorKind: null,
    durationUsualSeconds: 10,
    progress: null,
    confirmedThrough: ago(2_000),
    ...more,
  };
}
