import type pg from 'pg';
import { inTransaction } from '../db/sql.ts';
import type { Logger } from '../log.ts';
import { bookkeeping, type SyncSchemas } from './schemas.ts';

/**
 * One step of a sync's own schema (its bookkeeping in `<schema>_swap`), numbered within its
 * scope: `core` for what every sync has, a kind's name for that kind's. Steps run in order,
 * once each, recorded in `<schema>_swap._migrations`, so a database made by any release is
 * brought up to date in place. Each sync sharing a database has its own ledger.
 */
export interface SyncDbMigration {
  version: number;
  name: string;
  up(client: pg.ClientBase, schemas: SyncSchemas): Promise<void>;
}

export interface MigrationSet {
  scope: string;
  migrations: SyncDbMigration[];
}

const ledger = (table: string) => `CREATE TABLE IF NOT EXISTS ${table} (
  scope text NOT NULL,
  version integer NOT NULL,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, version)
)`;

/**
 * Applies the steps a sync database has not had yet, each in a transaction of its own, under
 * a lock that makes concurrent callers (a runner starting, a proxy writing, a second process)
 * wait for each other rather than race. Returns how many were applied.
 */
export async function migrateSyncDatabase(db: pg.Pool, sets: MigrationSet[], schemas: SyncSchemas, logger?: Logger): Promise<number> {
  let applied = 0;
  const table = bookkeeping(schemas, '_migrations');
  for (const { scope, migrations } of sets) {
    const ordered = [...migrations].sort((a, b) => a.version - b.version);
    for (const migration of ordered) {
      const ran = await inTransaction(db, async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('tributary sync-database migrations', 0))");
        await tx.query(ledger(table));
        const done = await tx.query(`SELECT 1 FROM ${table} WHERE scope = $1 AND version = $2`, [scope, migration.version]);
        if (done.rowCount) return false;
        await migration.up(tx, schemas);
        await tx.query(`INSERT INTO ${table} (scope, version, name) VALUES ($1, $2, $3)`, [scope, migration.version, migration.name]);
        return true;
      });
      if (ran) {
        applied++;
        logger?.info({ schema: schemas.live, scope, version: migration.version, migration: migration.name }, 'sync database migrated');
      }
    }
  }
  return applied;
}
