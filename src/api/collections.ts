import type { SyncRecord } from '../control/syncs.ts';
import type { ApiOptions } from './context.ts';

/** A collection of a sync as requests name it (a topic's last part), with where it lives. */
export interface SyncCollection {
  collection: string;
  table: string;
  /** The record-id column. */
  key: string;
  columns: string[];
}

/**
 * The collections a sync has now: the tables of its schema whose changes are events, by
 * the kind's own rules (the decoder's). Backfills and webhook filters check what they name
 * against this, so a typo is a 400 rather than a backfill or filter that never matches.
 */
export async function collectionsOf(api: ApiOptions, sync: SyncRecord): Promise<Map<string, SyncCollection>> {
  const tables = api.syncTables;
  if (!tables) throw new Error('collectionsOf: createApiApp sets api.syncTables');
  const rules = api.kinds.get(sync.kind).events;
  const found = new Map<string, SyncCollection>();
  for (const [table, columns] of await tables.columns(sync)) {
    const collection = rules.collectionOf(table);
    const key = rules.keyOf(table);
    if (collection === undefined || !columns.includes(key)) continue;
    found.set(collection, { collection, table, key, columns });
  }
  return found;
}
