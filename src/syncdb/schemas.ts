import { ident } from '../db/sql.ts';

/**
 * Where a sync's objects live in its database: the one place their names are derived. A sync
 * that made its database uses `public`; one that shares another's database (`database_of`)
 * has a schema of its own. Rebuilds and bookkeeping go to `<schema>_swap`, which readers
 * cannot open and the publication does not cover.
 */
export interface SyncSchemas {
  /** Its tables and `_sync_meta`: what readers see and the decoder turns into events. */
  readonly live: string;
  /** Rebuilds, then `_tables`, `_state`, `_migrations`, `_recent_writes` and the kind's own. */
  readonly swap: string;
}

export const DEFAULT_SCHEMA = 'public';

export function schemasOf(live: string): SyncSchemas {
  return { live, swap: `${live}_swap` };
}

/** The schemas of a sync that made its database (every sync made before schemas existed). */
export const PUBLIC_SCHEMAS = schemasOf(DEFAULT_SCHEMA);

/** A bookkeeping table of the sync, quoted: `"public_swap"."_state"`. */
export const bookkeeping = (schemas: SyncSchemas, table: string) => `${ident(schemas.swap)}.${ident(table)}`;

/** A table readers see, quoted: `"public"."_sync_meta"`. */
export const liveTable = (schemas: SyncSchemas, table: string) => `${ident(schemas.live)}.${ident(table)}`;

/** The marks of proxied writes into tables of the live schema `live` (src/writer/marks.ts). */
export const marksTableOf = (live: string) => bookkeeping(schemasOf(live), '_recent_writes');

/** 63 (PostgreSQL's limit) less `_swap`. */
export const MAX_SCHEMA_LENGTH = 58;

/**
 * Why `name` cannot be a shared sync's schema, or undefined when it can: lower-case letters,
 * digits and underscores, a letter first (no quoting surprises for SQL users), not a name
 * PostgreSQL or Tributary keeps for itself.
 */
export function schemaNameProblem(name: string): string | undefined {
  if (!new RegExp(`^[a-z][a-z0-9_]{0,${MAX_SCHEMA_LENGTH - 1}}$`).test(name)) {
    return `${JSON.stringify(name)} is not a valid name: lower-case letters, digits and underscores, a letter first, at most ${MAX_SCHEMA_LENGTH} characters`;
  }
  if (name === DEFAULT_SCHEMA || name === 'information_schema' || name.startsWith('pg_') || name.endsWith('_swap')) {
    return `${name} is reserved (public, information_schema, pg_… and …_swap are)`;
  }
  return undefined;
}
