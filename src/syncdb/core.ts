import { hideOtherTenants } from './catalogue.ts';
import type { SyncDbMigration } from './migrate.ts';
import { bookkeeping, liveTable, marksTableOf } from './schemas.ts';

/**
 * What every sync keeps in `<schema>_swap`, whatever its kind. The first step adopts a
 * database made before the steps were numbered: it creates only what is missing.
 */
export const CORE_MIGRATIONS: SyncDbMigration[] = [
  {
    version: 1,
    name: 'bookkeeping: built tables, state, recent writes',
    async up(client, schemas) {
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${bookkeeping(schemas, '_tables')} (
           upstream_id text PRIMARY KEY,
           db_name text NOT NULL UNIQUE,
           mapping jsonb NOT NULL,
           built_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
      await client.query(`CREATE TABLE IF NOT EXISTS ${bookkeeping(schemas, '_state')} (key text PRIMARY KEY, value jsonb NOT NULL)`);
      // Rows a proxied write put in (marks.ts): a fetch older than the mark does not undo them.
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${marksTableOf(schemas.live)} (
           tbl text NOT NULL,
           id  text NOT NULL,
           at  bigint NOT NULL,
           PRIMARY KEY (tbl, id)
         )`,
      );
    },
  },
  {
    version: 2,
    name: "readers see no other tenant's sessions, slots or activity",
    up: (client) => hideOtherTenants(client),
  },
  {
    version: 3,
    name: '_sync_meta writes no WAL',
    // Written at every cycle's start and end and never an event: as a logged table, each
    // write was WAL that every walsender of the server read and decoded (docs/performance.md).
    async up(client, schemas) {
      const table = liveTable(schemas, '_sync_meta');
      const { rows } = await client.query('SELECT relpersistence FROM pg_class WHERE oid = to_regclass($1)', [table]);
      if (rows[0]?.relpersistence === 'p') await client.query(`ALTER TABLE ${table} SET UNLOGGED`);
    },
  },
];

export const CORE = { scope: 'core', migrations: CORE_MIGRATIONS };
