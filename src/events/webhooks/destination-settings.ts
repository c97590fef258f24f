import type { Signing } from './attempts.ts';
import type { WebhookDestination } from './destinations.ts';
import type { WebhookFilter } from './filter.ts';

/** What a running worker takes in place, without stopping (DestinationWorker.update). */
export interface DestinationSettings {
  filter: WebhookFilter | null;
  maxPerSecond: number | null;
  signing: Signing;
}

/** What a worker starts from. */
export interface WorkerDestination extends DestinationSettings {
  id: string;
  url: URL;
  topics: string[];
  cursorSeq: string;
  /** The cursor generation the worker started with: it saves its cursor only while it is current. */
  cursorGeneration: string;
  failingSince: Date | null;
}

type Row = WebhookDestination & { signing: () => Signing };

/** A destination row as its worker takes it. Unsealing the secrets may throw. */
export function workerDestination(row: Row): WorkerDestination {
  return {
    id: row.id,
    url: new URL(row.url),
    topics: row.topics,
    cursorSeq: row.cursorSeq,
    cursorGeneration: row.cursorGeneration,
    failingSince: row.failingSince,
    ...settingsOf(row),
  };
}

export function settingsOf(row: Row): DestinationSettings {
  return { filter: row.filter, maxPerSecond: row.maxPerSecond, signing: row.signing() };
}

/**
 * A change of these restarts the worker: a new URL or topics (delivery resumes from the
 * saved cursor, so a few events may be sent twice, with the same webhook-id), or a cursor
 * moved back (recover).
 */
export const restartKey = (row: WebhookDestination) => JSON.stringify([row.url, [...row.topics].sort(), row.cursorGeneration]);

/** A change of these is taken in place: the filter, the rate, a rotated secret. */
export const settingsKey = (row: WebhookDestination) => JSON.stringify([row.filter, row.maxPerSecond, row.secretVersion]);
