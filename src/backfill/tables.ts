import type pg from 'pg';
import type { CollectionRules } from '../decoder/events.ts';

/** A table of a sync's schema whose changes are events: its collection and record-id column. */
export interface CollectionTable {
  table: string;
  collection: string;
  key: string;
}

/** Collection → its table, in `schema`, by the kind's rules (tables that are no collection left out). */
export async function collectionTables(db: pg.ClientBase | pg.Pool, schema: string, rules: CollectionRules): Promise<Map<string, CollectionTable>> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
    [schema],
  );
  const tables = new Map<string, CollectionTable>();
  for (const { name } of rows) {
    const collection = rules.collectionOf(name);
    if (collection !== undefined) tables.set(collection, { table: name, collection, key: rules.keyOf(name) });
  }
  return tables;
}
