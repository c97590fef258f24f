import { setTimeout as sleep } from 'node:timers/promises';
import { call, type ClientOptions } from './client.ts';
import { statusLine, type StatusOut } from './status-line.ts';

/**
 * `tributary syncs watch`: a sync's first pass as a progress bar. The runners' progress is
 * read without knowing the kind: each `<name>_done`/`<name>_total` pair is a step count (the
 * first one fills the bar), other numbers are running counts, strings say where it is.
 */

export interface Step {
  name: string;
  done: number;
  total: number;
}

export interface Progress {
  steps: Step[];
  counts: Array<{ name: string; value: number }>;
  words: string[];
}

export function readProgress(progress: unknown): Progress {
  const read: Progress = { steps: [], counts: [], words: [] };
  if (!progress || typeof progress !== 'object') return read;
  const fields = progress as Record<string, unknown>;
  for (const [key, value] of Object.entries(fields)) {
    const pair = /^(.+)_(done|total)$/.exec(key);
    if (pair) {
      const [, name, end] = pair;
      const total = fields[`${name}_total`];
      if (end === 'done' && typeof value === 'number' && typeof total === 'number') read.steps.push({ name: name!, done: value, total });
    } else if (typeof value === 'number') {
      read.counts.push({ name: key, value });
    } else if (typeof value === 'string') {
      read.words.push(value);
    }
  }
  return read;
}

const BAR_WIDTH = 20;

function bar(fraction: number): string {
  // Down, like the percentage: the bar is full only when the pass is.
  const filled = Math.floor(Math.min(1, Math.max(0, fraction)) * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}%`;
}

const stepsText = (steps: Step[]) => steps.map((s) => `${s.name} ${s.done}/${s.total}`);

/** One line of a pass under way; `spinner` stands in for the bar while there are no figures (a terminal only). */
export function progressLine(progress: Progress, spinner?: string): string {
  const first = progress.steps[0];
  const parts = [
    first && first.total > 0 ? bar(first.done / first.total) : (spinner ?? '...'),
    ...progress.words,
    ...stepsText(progress.steps),
    ...progress.counts.map((c) => `${c.name} ${c.value.toLocaleString('en-US')}`),
  ];
  if (parts.length === 1) parts.push('waiting for the first pass to report progress');
  return parts.join('  ');
}

/** The last line: every step at its total (the runner clears its progress once the pass is done). */
export function completeLine(steps: Step[]): string {
  return [bar(1), ...stepsText(steps.map((s) => ({ ...s, done: s.total }))), 'first pass complete'].join('  ');
}

interface SyncStatusView {
  status: { indicator: string; reason: string; completed_at: string | null; progress: unknown };
}

export interface WatchOptions {
  /** Its signal (Ctrl-C) ends the watch at once, with an AbortError. */
  client: ClientOptions;
  id: string;
  intervalMs: number;
  out: StatusOut;
}

const SPINNER = ['|', '/', '-', '\\'];

/**
 * Polls the sync until its first pass is complete and its indicator normal; throws with the
 * reason if it turns red. A terminal sees one line redrawn; a log a line per change of figures.
 */
export async function watchSync(options: WatchOptions): Promise<void> {
  const { out } = options;
  const route = `/api/syncs/${encodeURIComponent(options.id)}`;
  const row = statusLine(out);
  let lastSteps: Step[] = [];
  const show = row.show;
  try {
    for (let frame = 0; ; frame++) {
      const { status } = (await call(options.client, 'GET', route)) as SyncStatusView;
      if (status.indicator === 'red') throw new Error(`sync ${options.id} is red: ${status.reason}`);
      if (status.completed_at && status.indicator === 'normal') return void show(completeLine(lastSteps));
      const progress = readProgress(status.progress);
      if (progress.steps.length > 0) lastSteps = progress.steps;
      // A pass done while the indicator is yellow (a later cycle failing): waits for normal, saying why.
      const spinner = out.isTTY ? SPINNER[frame % SPINNER.length] : undefined;
      const line = status.completed_at ? completeLine(lastSteps) : progressLine(progress, spinner);
      show(status.indicator === 'normal' ? line : `${line}  (${status.indicator}: ${status.reason})`);
      await sleep(options.intervalMs, undefined, { signal: options.client.signal });
    }
  } finally {
    row.end();
  }
}
