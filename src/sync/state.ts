import type pg from 'pg';
import { bookkeeping, type SyncSchemas } from '../syncdb/schemas.ts';

/** A sync's own bookkeeping in `<schema>_swap._state` of its database, out of readers' sight (Airtable's webhook, Stripe's cursors). */
export async function loadState<T>(db: pg.Pool | pg.ClientBase, schemas: SyncSchemas, key: string): Promise<T | undefined> {
  const { rows } = await db.query<{ value: T }>(`SELECT value FROM ${bookkeeping(schemas, '_state')} WHERE key = $1`, [key]);
  return rows[0]?.value;
}

export async function loadStates<T>(db: pg.Pool | pg.ClientBase, schemas: SyncSchemas, prefix: string): Promise<Map<string, T>> {
  const { rows } = await db.query<{ key: string; value: T }>(`SELECT key, value FROM ${bookkeeping(schemas, '_state')} WHERE starts_with(key, $1)`, [prefix]);
  return new Map(rows.map((r) => [r.key.slice(prefix.length), r.value]));
}

export async function saveState(db: pg.Pool | pg.ClientBase, schemas: SyncSchemas, key: string, value: unknown): Promise<void> {
  await db.query(`INSERT INTO ${bookkeeping(schemas, '_state')} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, [
    key,
    JSON.stringify(value),
  ]);
}

export async function clearStates(db: pg.Pool | pg.ClientBase, schemas: SyncSchemas, prefix: string): Promise<void> {
  await db.query(`DELETE FROM ${bookkeeping(schemas, '_state')} WHERE starts_with(key, $1)`, [prefix]);
}
