import { pause } from '../../time.ts';
import type { EventBus } from '../bus.ts';

export interface PollAttempt<T> {
  items: T[];
  /** Bus marks taken before the read, for the syncs whose news could change the answer. */
  marks: Map<string, number>;
}

/** Takes the bus marks of `syncIds`; call before reading the log. */
export function marksOf(bus: EventBus, syncIds: Iterable<string>): Map<string, number> {
  return new Map([...new Set(syncIds)].map((id) => [id, bus.mark(id)]));
}

/**
 * A long poll: tries, and while nothing came back, waits for the bus to report news of one
 * of the marked syncs (or `sliceMs`, whichever is first) and tries again, until `timeoutMs`.
 * No marks (nothing the account may see) means a plain wait: the same time as for a topic
 * that does not exist, so a wait reveals nothing about other accounts.
 */
export async function longPoll<T>(
  options: { bus: EventBus; timeoutMs: number; signal: AbortSignal; sliceMs: number | (() => number) },
  attempt: () => Promise<PollAttempt<T>>,
): Promise<T[]> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const { items, marks } = await attempt();
    if (items.length > 0) return items;
    const remaining = deadline - Date.now();
    if (remaining <= 0 || options.signal.aborted) return [];
    const slice = Math.min(remaining, typeof options.sliceMs === 'function' ? options.sliceMs() : options.sliceMs);
    const sliceEnd = Date.now() + slice;
    const changed = marks.size > 0 ? await options.bus.changedSinceAny(marks, slice, options.signal) : false;
    // A bus that is stopped answers "no news" at once: wait out the slice instead of spinning.
    if (!changed && Date.now() < sliceEnd) await pause(sliceEnd - Date.now(), options.signal);
    if (options.signal.aborted) return [];
  }
}
