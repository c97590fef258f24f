import { setTimeout as sleep } from 'node:timers/promises';
import { call, type ClientOptions } from './client.ts';
import { shortDuration } from './format.ts';
import type { BackfillRow } from './lists.ts';
import { statusLine, type StatusOut } from './status-line.ts';

/**
 * `tributary backfills start --wait`: follows a backfill until it finishes, a line of
 * progress at a time on stderr (stdout keeps the final JSON answer for scripts).
 */

const rowsText = (rows: number) => `${rows.toLocaleString('en-US')} ${rows === 1 ? 'row' : 'rows'}`;

/** One line for a backfill under way or finished: which collection it reads, how many rows so far. */
export function backfillLine(backfill: BackfillRow): string {
  const { id, state, collections } = backfill;
  const of = `${collections.length} ${collections.length === 1 ? 'collection' : 'collections'}`;
  if (state === 'running') {
    const at = backfill.collection ? collections.indexOf(backfill.collection) : -1;
    // No collection: every one is read, and the backfill waits for its last reads to reach the
    // event log before it says done. (Queued or not picked up yet, it names its first.)
    const where = at >= 0 ? `${backfill.collection} (${at + 1} of ${collections.length})` : `finishing (${of} read)`;
    return `${id}  running  ${where}  ${rowsText(backfill.rows)}`;
  }
  const took = backfill.finished_at ? ` in ${shortDuration((Date.parse(backfill.finished_at) - Date.parse(backfill.created_at)) / 1000)}` : '';
  if (state === 'done') return `${id}  done  ${rowsText(backfill.rows)} of ${of}${took}`;
  if (state === 'failed') return `${id}  failed after ${rowsText(backfill.rows)}: ${backfill.error ?? 'no reason given'}`;
  return `${id}  ${state} after ${rowsText(backfill.rows)}`;
}

export interface BackfillWaitOptions {
  /** Its signal (Ctrl-C) ends the wait at once, with an AbortError; the backfill goes on. */
  client: ClientOptions;
  syncId: string;
  id: string;
  intervalMs: number;
  out: StatusOut;
}

/**
 * Polls the backfill until it is no longer running and answers its last view. A terminal sees
 * one line redrawn; a log a line each time the figures change.
 */
export async function waitForBackfill(options: BackfillWaitOptions): Promise<BackfillRow> {
  const { out } = options;
  const route = `/api/syncs/${encodeURIComponent(options.syncId)}/backfills/${encodeURIComponent(options.id)}`;
  const row = statusLine(out);
  const show = row.show;
  try {
    for (;;) {
      const backfill = (await call(options.client, 'GET', route)) as BackfillRow;
      show(backfillLine(backfill));
      if (backfill.state !== 'running') return backfill;
      await sleep(options.intervalMs, undefined, { signal: options.client.signal });
    }
  } finally {
    row.end();
  }
}
