import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { pause } from '../time.ts';
import { MARK_CLOCK_MARGIN_MS } from '../writer/marks.ts';

/** Times running a record's fetch is held back for a proxied write before it is left to change capture. */
const HOLDS_IN_A_ROW = 3;

export interface RefetchQueueOptions {
  /** Fetches records of one table by id and writes them (the runner's refetch). */
  fetch(tableId: string, ids: string[]): Promise<void>;
  /** A due fetch failed: the records are left to the sweep, and the runner needs a full cycle. */
  onFailed(): void;
  /** Everything queued was written and someone may be waiting for that. */
  onDrained(): void;
  logger: Logger;
  /** How often due records are looked for (default 100 ms). */
  tickMs?: number;
}

interface Item {
  tableId: string;
  id: string;
  due: number;
}

/**
 * Records of an Airtable sync to fetch again later, by table: debounced changes (written once
 * stable for debounce_ms) and fetches a proxied write may have overtaken (held, fetched again
 * once the clock margin has passed). A pass may count only while the queue is quiet: nothing
 * queued, nothing taken out and not yet written, no failure since it began.
 */
export class RefetchQueue {
  private readonly pending = new Map<string, Item>();
  /** How many times running a record's fetch was held back. */
  private readonly holds = new Map<string, number>();
  /** Taken out of `pending` and not yet written. */
  private inFlight = 0;
  private failed = 0;

  constructor(private readonly options: RefetchQueueOptions) {}

  /** A change to write once `due` (its last change plus debounce_ms) has passed; a later change moves it on. */
  debounce(tableId: string, id: string, due: number): void {
    this.pending.set(key(tableId, id), { tableId, id, due });
  }

  /** Records to fetch at once (a sweep could not prove them gone); one already queued keeps its time. */
  fetchSoon(tableId: string, ids: string[]): void {
    const now = Date.now();
    for (const id of ids) if (!this.pending.has(key(tableId, id))) this.pending.set(key(tableId, id), { tableId, id, due: now });
  }

  /** The record was destroyed upstream: nothing left to fetch. */
  forget(tableId: string, id: string): void {
    this.pending.delete(key(tableId, id));
  }

  /**
   * Records whose fetch a proxied write may have overtaken: fetched again once the clock
   * margin has passed. A record held HOLDS_IN_A_ROW times running (written through the proxy
   * again and again) is left as the proxy wrote it: change capture brings any later change.
   */
  hold(tableId: string, ids: string[]): void {
    const due = Date.now() + MARK_CLOCK_MARGIN_MS + 100;
    for (const id of ids) {
      const k = key(tableId, id);
      const times = (this.holds.get(k) ?? 0) + 1;
      if (times > HOLDS_IN_A_ROW) {
        this.holds.delete(k);
        continue;
      }
      this.holds.set(k, times);
      this.pending.set(k, { tableId, id, due: Math.max(due, this.pending.get(k)?.due ?? 0) });
    }
  }

  /** A fetch of the record was written and not held back: its run of holds ends. */
  written(tableId: string, id: string): void {
    this.holds.delete(key(tableId, id));
  }

  /** Whether the record waits here (a sweep page leaves it to the queue). */
  has(tableId: string, id: string): boolean {
    return this.pending.has(key(tableId, id));
  }

  /** Failures so far: a pass records this at its start and asks quietSince() at its end. */
  get failures(): number {
    return this.failed;
  }

  /** Nothing queued or being written, and no failure since `failuresAtStart`. */
  quietSince(failuresAtStart: number): boolean {
    return this.pending.size === 0 && this.inFlight === 0 && this.failed === failuresAtStart;
  }

  /** Writes due records, table by table, until `signal` aborts. `ready` says whether fetches can run now. */
  async run(signal: AbortSignal, ready: () => boolean): Promise<void> {
    while (!signal.aborted) {
      await pause(this.options.tickMs ?? 100, signal);
      if (this.pending.size === 0 || !ready() || signal.aborted) continue;
      const now = Date.now();
      const due = new Map<string, string[]>();
      for (const [k, item] of this.pending) {
        if (item.due > now) continue;
        this.pending.delete(k);
        (due.get(item.tableId) ?? due.set(item.tableId, []).get(item.tableId)!).push(item.id);
      }
      // Out of `pending` but not written yet: the queue is not quiet meanwhile.
      this.inFlight += due.size;
      for (const [tableId, ids] of due) {
        try {
          await this.options.fetch(tableId, ids);
        } catch (thrown) {
          this.failed++;
          this.options.onFailed();
          this.options.logger.warn({ error: toError(thrown).message }, 'writing debounced records failed');
        } finally {
          this.inFlight--;
        }
      }
      if (due.size > 0 && this.pending.size === 0) this.options.onDrained();
    }
  }
}

const key = (tableId: string, id: string) => `${tableId}/${id}`;
