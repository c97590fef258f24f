import { isExhausted, type RetrySchedule } from './schedule.ts';
import type { AttemptResult } from './attempts.ts';
import type { AttemptOutcome, DeliveryLog, QueuedDelivery } from './deliveries.ts';
import type { WorkerDestination } from './destination-settings.ts';
import { type Item, itemOfRow, type Lane } from './lanes.ts';
import { deliveryRow, type ParkState } from './parking.ts';
import type { WorkerProgress } from './progress.ts';
import type { BackoffWakeups } from './backoff-wakeups.ts';
import type { DelivererTuning } from './tuning.ts';
import type { Notifier } from './wait.ts';

/** What a destination worker lends the deliveries of its lanes that work from the queue or fell behind. */
export interface LaneHost {
  readonly id: string;
  readonly signal: AbortSignal;
  readonly options: { schedule: RetrySchedule; log: DeliveryLog; tuning: DelivererTuning; destination: WorkerDestination };
  readonly progress: WorkerProgress;
  readonly wakeups: BackoffWakeups;
  readonly flushWakeup: Notifier;
  attempt(lane: Lane, item: Item): Promise<AttemptResult>;
  retryWait(lane: Lane, failures: number, outcome: AttemptResult): number;
  logExhausted(eventKey: string, attempts: number, outcome: AttemptOutcome): void;
  db<T>(work: () => Promise<T>): Promise<T>;
}

/** A 2xx on `lane`: its run of failures ends, it is counted, and lanes waiting out a back-off may try now. */
export function answered(w: Pick<LaneHost, 'progress' | 'wakeups'>, lane: Lane): void {
  lane.failingSince = undefined;
  lane.notBefore = 0;
  w.progress.delivered += 1;
  w.wakeups.answered();
}

/**
 * One event read from the log by a lane that fell behind. Delivered, or exhausted: the lane
 * moves on (true). Failed: written as the lane's retrying row, worked from the queue (false).
 */
export async function deliverBehind(w: LaneHost, lane: Lane, item: Item): Promise<boolean> {
  const { schedule, log, tuning } = w.options;
  const outcome = await w.attempt(lane, item);
  if (w.signal.aborted) return false;
  if (outcome.ok) {
    answered(w, lane);
    return true;
  }
  lane.failingSince ??= outcome.at.getTime();
  const exhausted = isExhausted(schedule, 1, lane.failingSince);
  if (exhausted) await countersSaved(w);
  const state: ParkState = exhausted
    ? { status: 'exhausted', outcome }
    : { status: 'retrying', outcome, next: new Date(Date.now() + w.retryWait(lane, 1, outcome)) };
  await w.db(() =>
    log.park(w.id, [deliveryRow(lane, item, state)], w.options.destination.cursorGeneration, {
      lane: lane.index,
      lanes: tuning.lanes,
      afterSeq: item.seq.toString(),
    }),
  );
  lane.afterSeq = item.seq;
  if (exhausted) w.logExhausted(item.eventKey, 1, outcome);
  return exhausted;
}

/**
 * The destination's counters first: whoever sees a delivery exhausted sees its attempts
 * counted. (A flush already under way may have read the counters before this attempt: then
 * one more.)
 */
export async function countersSaved(w: LaneHost): Promise<void> {
  for (let round = 0; round < 2 && w.progress.failedAttempts > 0 && !w.signal.aborted; round++) {
    const saved = w.progress.saved.wait(w.options.tuning.flushMs * 5 + 1000);
    w.flushWakeup.notify();
    await saved;
  }
}

export async function deliverQueued(w: LaneHost, lane: Lane, row: QueuedDelivery): Promise<void> {
  const { schedule, log } = w.options;
  let attempts = row.attempts;
  let firstAttemptAt = row.firstAttemptAt;
  let nextAt = row.nextAttemptAt?.getTime() ?? 0;
  const item = itemOfRow(row);
  while (!w.signal.aborted) {
    const wait = nextAt - Date.now();
    if (wait > 0) {
      const woken = await w.wakeups.waitOut(lane, wait);
      // The destination answers again: try now rather than at the end of a back-off that may
      // be an hour, but not before the head's Retry-After.
      if (woken === 'answered') nextAt = lane.notBefore;
      // A replay was asked for: the row may have been moved to now.
      else if (woken === 'retry') nextAt = (await w.db(() => log.nextAttemptAt(row.id)))?.getTime() ?? 0;
      continue;
    }
    const outcome = await w.attempt(lane, item);
    if (w.signal.aborted) return;
    attempts += 1;
    if (outcome.ok) {
      await w.db(() => log.delivered(row.id, attempts, outcome));
      answered(w, lane);
      return;
    }
    firstAttemptAt ??= outcome.at;
    lane.failingSince ??= (row.attempts > 0 && row.firstAttemptAt ? row.firstAttemptAt : outcome.at).getTime();
    if (isExhausted(schedule, attempts, lane.failingSince)) {
      const first = firstAttemptAt;
      await countersSaved(w);
      await w.db(() => log.failed(row.id, attempts, outcome, first, null));
      w.logExhausted(row.eventKey, attempts, outcome);
      return;
    }
    const next = new Date(Date.now() + w.retryWait(lane, attempts, outcome));
    const first = firstAttemptAt;
    await w.db(() => log.failed(row.id, attempts, outcome, first, next));
    nextAt = next.getTime();
  }
}
