import type pg from 'pg';
import type { Logger } from '../log.ts';
import { pause } from '../time.ts';
import { MARK_CLOCK_MARGIN_MS } from '../writer/marks.ts';
import { swapIn } from '../writer/swap.ts';
import type { TableMapping } from './schema.ts';
import { builtTable } from './tables.ts';
import type { SyncSchemas } from '../syncdb/schemas.ts';

/** Rounds of fetching proxied records again before a rebuilt table goes in regardless. */
const SWAP_ROUNDS = 5;

export interface SwapRoundsOptions {
  target: pg.Pool;
  schemas: SyncSchemas;
  signal: AbortSignal;
  logger: Logger;
  /** Fetches these records again into the rebuilt table; resolves to when the fetch began. */
  refetch(ids: string[]): Promise<number>;
}

/**
 * Swaps a rebuilt table in once it holds every record proxied meanwhile as it is now: records
 * marked since the rebuild began are fetched again into it first (swap.ts, SwapGuard). A fetch
 * covers a mark only when it began a clock margin after it, so it waits that out. After a few
 * rounds of writes still coming, the table goes in anyway and change capture catches up:
 * the records still to fetch again are returned.
 */
export async function swapInAfterProxiedWrites(options: SwapRoundsOptions, mapping: TableMapping, rebuildFrom: number): Promise<string[]> {
  const fetched = new Map<string, number>();
  const covered = (id: string, at: number) => (fetched.get(id) ?? -Infinity) > at + MARK_CLOCK_MARGIN_MS;
  const since = rebuildFrom - MARK_CLOCK_MARGIN_MS;
  for (let round = 0; ; round++) {
    // The last round swaps whatever it finds, and returns the records still to fetch again.
    const leftover: string[] = [];
    const last = {
      since,
      covered: (id: string, at: number) => {
        if (!covered(id, at)) leftover.push(id);
        return true;
      },
    };
    const marks = await swapIn(options.target, builtTable(mapping, options.schemas), round < SWAP_ROUNDS ? { since, covered } : last);
    if (marks.length === 0) return leftover;
    const newest = marks.reduce((latest, m) => Math.max(latest, m.at), 0);
    await pause(Math.max(0, newest + MARK_CLOCK_MARGIN_MS + 1 - Date.now()), options.signal);
    if (options.signal.aborted) throw new Error('stopped');
    const ids = [...new Set(marks.map((m) => m.id))];
    const fetchedAt = await options.refetch(ids);
    for (const id of ids) fetched.set(id, fetchedAt);
    options.logger.debug({ table: mapping.name, records: ids.length, round }, 'proxied writes fetched again before the swap');
  }
}
