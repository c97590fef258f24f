import type { AirtableSettings } from './settings.ts';
import type { TableMapping } from './schema.ts';
import type { WebhookState } from './webhook.ts';

/**
 * What the parts of an Airtable sync (the cycle loop in runner.ts, change capture in
 * capture.ts, the refetch queue) share about the base while they run.
 */
export class AirtableSyncState {
  settings: AirtableSettings | undefined;
  webhook: WebhookState | undefined;
  /** Tables as built in `public`, by upstream id. */
  live = new Map<string, TableMapping>();
  /** Changes seen while a table is rebuilt in public_swap: fetched again once it is swapped in. */
  readonly rebuilding = new Map<string, Set<string>>();
  /** True while a cycle builds every table from scratch (first load): no payload can apply yet. */
  loading = false;
  /** Cycles begun, numbered from 1. */
  cyclesBegun = 0;
  /**
   * Non-zero: change capture has missed something only a full cycle catches (a schema change,
   * a table not built yet, a new webhook's blind spot, a debounced write that failed), so no
   * capture poll counts as a pass until cycle number `needsCycle` (or a later one) completes.
   */
  needsCycle = 0;

  /**
   * Records change capture wrote or deleted, with the time their fetch (or the payload read
   * naming their deletion) began: a sweep page made before then holds an older copy.
   */
  private readonly recent = new Map<string, number>();

  /** Change capture wrote (or deleted) these records from what it read at `at`. */
  touched(tableId: string, ids: Iterable<string>, at: number): void {
    for (const id of ids) this.recent.set(`${tableId}/${id}`, at);
  }

  /** Change capture has a copy of the record (or its deletion) newer than a page made at `fetchedAt`. */
  touchedSince(tableId: string, id: string, fetchedAt: number): boolean {
    return (this.recent.get(`${tableId}/${id}`) ?? 0) > fetchedAt;
  }

  /** Forgets what was touched before `cutoff`. */
  forgetTouched(cutoff: number): void {
    for (const [key, at] of this.recent) if (at < cutoff) this.recent.delete(key);
  }

  /** Only a cycle begun from now on can make capture polls passes again. */
  needCycle(): void {
    this.needsCycle = this.cyclesBegun + 1;
  }

  /** No table is being rebuilt with changes waiting for its swap. */
  get nothingRebuilding(): boolean {
    return [...this.rebuilding.values()].every((held) => held.size === 0);
  }
}

/** Runs a pause that ends when `stop` aborts or when the `end` handed to `expose` is called. */
export async function interruptible(
  stop: AbortSignal,
  expose: (end: (() => void) | undefined) => void,
  wait: (signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const pauseEnds = new AbortController();
  const end = () => pauseEnds.abort();
  stop.addEventListener('abort', end, { once: true });
  expose(end);
  try {
    await wait(pauseEnds.signal);
  } finally {
    expose(undefined);
    stop.removeEventListener('abort', end);
  }
}
