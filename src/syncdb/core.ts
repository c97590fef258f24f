import { hideOtherTenants } from './catalogue.ts';
import type { SyncDbMigration } from './migrate.ts';

/** The marks of recent proxied writes (src/writer/marks.ts). */
export const MARKS_TABLE = 'public_swap._recent_writes';

/**
 * What every sync database keeps in `public_swap`, whatever its kind. The first step adopts a
 * database made before the steps were numbered: it creates only what is missing.
 */
export const CORE_MIGRATIONS: SyncDbMigration[] = [
  {
    version: 1,
    name: 'bookkeeping: built tables, state, recent writes',
    async up(client) {
      await client.query(
        `CREATE TABLE IF NOT EXISTS public_swap._tables (
           upstream_id text PRIMARY KEY,
           db_name text NOT NULL UNIQUE,
           mapping jsonb NOT NULL,
           built_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
      await client.query('CREATE TABLE IF NOT EXISTS public_swap._state (key text PRIMARY KEY, value jsonb NOT NULL)');
      // Rows a proxied write put in (marks.ts): a fetch older than the mark does not undo them.
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${MARKS_TABLE} (
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
    up: hideOtherTenants,
  },
  {
    version: 3,
    name: '_sync_meta writes no WAL',
    // Written at every cycle's start and end and never an event: as a logged table, each
    // write was WAL that every walsender of the server read and decoded (docs/performance.md).
    async up(client) {
      const { rows } = await client.query("SELECT relpersistence FROM pg_class WHERE oid = 'public._sync_meta'::regclass");
      if (rows[0]?.relpersistence === 'p') await client.query('ALTER TABLE public._sync_meta SET UNLOGGED');
    },
  },
];

export const CORE = { scope: 'core', migrations: CORE_MIGRATIONS };
