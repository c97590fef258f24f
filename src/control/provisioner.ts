import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import pg from 'pg';
import { TributaryError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { ident, withClient, withDatabase } from '../db/sql.ts';
import { createSlot, dropSlot } from '../db/slots.ts';
import { endOverruns, type Overruns } from './reader-sessions.ts';
import { DEFAULT_READER_LIMITS, type ReaderLimits, type RoleSetting, readerSettings } from './reader-limits.ts';
import { connectionConfig } from '../db/connect.ts';
import { CORE } from '../syncdb/core.ts';
import { type MigrationSet, migrateSyncDatabase } from '../syncdb/migrate.ts';
import { liveTable, PUBLIC_SCHEMAS, type SyncSchemas } from '../syncdb/schemas.ts';
import { missingRights, readServerFacts } from './server-checks.ts';
import { buildTemplate, fileCopy, type TemplateSpec, templateName } from './templates.ts';
import { openPool } from '../db/pool.ts';

/** Every sync database carries one publication of this name, covering `public` and each shared sync's schema. */
export const PUBLICATION = 'tributary';

export interface SyncDatabase {
  /** Admin connection to the server that holds the database (any database on it). */
  adminUrl: string;
  name: string;
  role: string;
}

/**
 * A SCRAM-SHA-256 verifier (RFC 5802 / 7677), computed here so that the plain password
 * never travels to the server, and so never lands in its statement log.
 */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

export interface ReaderCheck extends Overruns {
  /** The role's settings that differed from what it should have, now put back. */
  changed: string[];
}

/**
 * The reader's settings this admin connection can give it: those only a superuser may set are
 * left out on a customer-owned server whose role is not one (that server is its owner's to bound).
 */
function settingsFor(limits: ReaderLimits, superuser: boolean): RoleSetting[] {
  return readerSettings(limits).filter((s) => superuser || !s.superuserOnly);
}

async function isSuperuser(admin: pg.Client): Promise<boolean> {
  const { rows } = await admin.query<{ rolsuper: boolean }>('SELECT rolsuper FROM pg_roles WHERE rolname = current_user');
  return rows[0]?.rolsuper === true;
}

async function applySettings(admin: pg.Client, role: string, settings: RoleSetting[]): Promise<void> {
  for (const setting of settings) await admin.query(`ALTER ROLE ${ident(role)} SET ${setting.name} = ${pg.escapeLiteral(setting.value)}`);
}

/** The advisory-lock class of reader-role changes (the second key is the role's name). */
const ROLE_LOCK_CLASS = 0x726f6c;

/**
 * One change of a reader role at a time (the reader guard's restore, the API changing its
 * limits or connection limit): two ALTER ROLE at once fail on the role's catalog rows ("tuple
 * concurrently updated", a unique violation on pg_db_role_setting). Held until `admin` ends.
 */
export async function lockRole(admin: pg.ClientBase, role: string): Promise<void> {
  await admin.query('SELECT pg_advisory_lock($1, hashtext($2))', [ROLE_LOCK_CLASS, role]);
}

/**
 * Puts a reader role back as provisioned, with the sync's current limits. PostgreSQL lets every
 * role change its own password and its own defaults (`ALTER ROLE current_user SET …`, also `IN
 * DATABASE`), and no hook short of a server extension can stop it: so the role's settings are
 * compared with what it should have, and any difference reset, and the password set again.
 * Then ends the reader's statements and idle transactions that outlived the limits
 * (reader-sessions.ts). Answers the settings that differed (the password cannot be read back, so
 * it is not counted) and what was ended.
 */
export async function restoreReaderRole(db: SyncDatabase, password: string, limits: ReaderLimits): Promise<ReaderCheck> {
  const role = ident(db.role);
  return withClient(db.adminUrl, async (admin) => {
    await lockRole(admin, db.role);
    const superuser = await isSuperuser(admin);
    const expected = settingsFor(limits, superuser);
    const { rows } = await admin.query<{ database: string | null; config: string[] }>(
      `SELECT d.datname AS database, s.setconfig AS config FROM pg_db_role_setting s
         JOIN pg_roles r ON r.oid = s.setrole LEFT JOIN pg_database d ON d.oid = s.setdatabase
        WHERE r.rolname = $1`,
      [db.role],
    );
    const own = new Map((rows.find((r) => r.database === null)?.config ?? []).map((c) => [c.slice(0, c.indexOf('=')), c.slice(c.indexOf('=') + 1)]));
    const differing = [
      ...expected.filter((s) => own.get(s.name) !== s.value).map((s) => s.name),
      ...[...own.keys()].filter((name) => !expected.some((s) => s.name === name)),
      ...rows.filter((r) => r.database !== null).map((r) => `settings in database ${r.database}`),
    ];
    if (differing.length > 0) {
      for (const row of rows) {
        await admin.query(row.database === null ? `ALTER ROLE ${role} RESET ALL` : `ALTER ROLE ${role} IN DATABASE ${ident(row.database)} RESET ALL`);
      }
      await applySettings(admin, db.role, expected);
    }
    await admin.query(`ALTER ROLE ${role} PASSWORD '${scramVerifier(password)}'`);
    const overruns = superuser ? await endOverruns(admin, db.role, limits) : { cancelled: 0, ended: 0 };
    return { changed: differing, ...overruns };
  });
}

/** Large-object functions let any role write to pg_largeobject; the reader must not. */
const largeObjectWriters = ['lo_create(oid)', 'lo_creat(integer)', 'lo_from_bytea(oid, bytea)'];

/**
 * Creates the sync's database and its read-only role:
 * - the role may CONNECT to this database only, USAGE on `public` only, SELECT on tables
 *   only (default privileges also cover tables built in `public_swap` and swapped in);
 * - `default_transaction_read_only` is a second wall, not the only one: the role could
 *   turn it off, and then still lacks every write privilege;
 * - one publication over schema `public` and one logical slot for the decoder; tables
 *   rebuilt in `public_swap` are outside the publication until they are swapped in.
 * With `template`, the database is a copy of the server's template for the kind (templates.ts),
 * which holds everything but the reader's rights; without, it is built in place.
 */
export async function provisionDatabase(
  db: SyncDatabase,
  password: string,
  logger: Logger,
  connectionLimit = 5,
  migrations: MigrationSet[] = [],
  limits: ReaderLimits = DEFAULT_READER_LIMITS,
  template?: TemplateSpec,
): Promise<void> {
  const role = ident(db.role);
  const database = ident(db.name);
  const from = template ? templateName(template, [CORE, ...migrations]) : 'template0';
  await withClient(db.adminUrl, async (admin) => {
    await admin.query(`CREATE ROLE ${role} LOGIN NOINHERIT CONNECTION LIMIT ${Math.trunc(connectionLimit)} PASSWORD '${scramVerifier(password)}'`);
    await applySettings(admin, db.role, settingsFor(limits, await isSuperuser(admin)));
    const copy = async () => admin.query(`CREATE DATABASE ${database} TEMPLATE ${ident(from)} ENCODING 'UTF8'${await fileCopy(admin)}`);
    for (let attempt = 1; ; attempt++) {
      try {
        await copy();
        break;
      } catch (error) {
        // 3D000: no template of this release on the server yet, or another release's build dropped it
        // between two syncs (a rolling upgrade): build it, then copy.
        if (!template || (error as { code?: string }).code !== '3D000' || attempt >= 3) throw error;
        await buildTemplate(db.adminUrl, template.kind, from, (url) => buildContents(url, migrations, logger, template.prepare), logger);
      }
    }
    await admin.query(`REVOKE ALL ON DATABASE ${database} FROM PUBLIC`);
    await admin.query(`GRANT CONNECT ON DATABASE ${database} TO ${role}`);
  });
  const url = withDatabase(db.adminUrl, db.name);
  if (!template) await buildContents(url, migrations, logger);
  await withClient(url, async (admin) => {
    await admin.query('BEGIN');
    await admin.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
    await admin.query(`ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO ${role}`);
    await admin.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`);
    await admin.query('COMMIT');
    // Created after the publication so that the decoder sees every table from the first change on.
    await createSlot(admin, db.name);
  });
  logger.info({ database: db.name, template: template ? from : undefined }, 'sync database provisioned');
}

/** What a new sync database holds whoever reads it: schemas, `_sync_meta`, the publication, its bookkeeping, the kind's tables. */
async function buildContents(url: string, migrations: MigrationSet[], logger: Logger, prepare?: (url: string) => Promise<void>): Promise<void> {
  await withClient(url, async (admin) => {
    await admin.query('BEGIN');
    await admin.query('REVOKE ALL ON SCHEMA public FROM PUBLIC');
    await admin.query('CREATE SCHEMA public_swap');
    for (const fn of largeObjectWriters) await admin.query(`REVOKE EXECUTE ON FUNCTION pg_catalog.${fn} FROM PUBLIC`);
    await createSyncMeta(admin, PUBLIC_SCHEMAS);
    await admin.query(`CREATE PUBLICATION ${ident(PUBLICATION)} FOR TABLES IN SCHEMA public`);
    await admin.query('COMMIT');
  });
  await migrateBookkeeping(url, PUBLIC_SCHEMAS, migrations, logger);
  await prepare?.(url);
}

/** The one-row `_sync_meta` readers look at, in the sync's live schema. */
async function createSyncMeta(admin: pg.Client, schemas: SyncSchemas): Promise<void> {
  const table = liveTable(schemas, '_sync_meta');
  // UNLOGGED: no WAL for the server's walsenders to decode (src/writer/sync-meta.ts).
  await admin.query(`CREATE UNLOGGED TABLE ${table} (started_at timestamptz, completed_at timestamptz, duration_last interval)`);
  await admin.query(`INSERT INTO ${table} VALUES (NULL, NULL, NULL)`);
  await admin.query(`COMMENT ON TABLE ${table} IS 'Tributary: when the last sync started and completed'`);
}

/**
 * The sync's own bookkeeping, out of readers' sight and outside the publication: numbered
 * steps, the same a runner applies to a database made by an older release.
 */
async function migrateBookkeeping(url: string, schemas: SyncSchemas, migrations: MigrationSet[], logger: Logger): Promise<void> {
  const pool = openPool({ ...connectionConfig(url), max: 1 });
  try {
    await migrateSyncDatabase(pool, [CORE, ...migrations], schemas, logger);
  } finally {
    await pool.end();
  }
}

/**
 * A sync in another sync's database (`database_of`): its live schema, which the database's
 * reader may open and the publication covers (so the one slot carries its changes too), and
 * its swap schema for rebuilds and bookkeeping, which neither sees. A name the database
 * already has is a 409; nothing is left behind by a failure (one transaction).
 */
export async function provisionSchema(db: SyncDatabase, schemas: SyncSchemas, migrations: MigrationSet[], logger: Logger): Promise<void> {
  await withClient(withDatabase(db.adminUrl, db.name), async (admin) => {
    await admin.query('BEGIN');
    try {
      const { rows } = await admin.query<{ nspname: string }>('SELECT nspname FROM pg_namespace WHERE nspname = ANY($1)', [[schemas.live, schemas.swap]]);
      if (rows[0]) throw new TributaryError('conflict', `schema: the database already has a schema ${rows[0].nspname}`);
      await admin.query(`CREATE SCHEMA ${ident(schemas.live)}`);
      await admin.query(`GRANT USAGE ON SCHEMA ${ident(schemas.live)} TO ${ident(db.role)}`);
      await admin.query(`CREATE SCHEMA ${ident(schemas.swap)}`);
      await createSyncMeta(admin, schemas);
      await admin.query(`ALTER PUBLICATION ${ident(PUBLICATION)} ADD TABLES IN SCHEMA ${ident(schemas.live)}`);
      await admin.query('COMMIT');
    } catch (error) {
      await admin.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
  await migrateBookkeeping(withDatabase(db.adminUrl, db.name), schemas, migrations, logger);
  logger.info({ database: db.name, schema: schemas.live }, 'sync schema provisioned');
}

/**
 * Removes what provisionSchema made; safe to run again. With `keepSchema` the tables stay for
 * the reader, out of the publication (no sync writes them any more) and without bookkeeping.
 */
export async function dropSchema(db: SyncDatabase, schemas: SyncSchemas, options: { keepSchema: boolean }, logger: Logger): Promise<void> {
  const exists = await withClient(db.adminUrl, async (admin) => {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.name]);
    return rowCount === 1;
  });
  if (!exists) return;
  await withClient(withDatabase(db.adminUrl, db.name), async (admin) => {
    const { rowCount } = await admin.query(
      `SELECT 1 FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid JOIN pg_namespace n ON n.oid = pn.pnnspid
        WHERE p.pubname = $1 AND n.nspname = $2`,
      [PUBLICATION, schemas.live],
    );
    if (rowCount) await admin.query(`ALTER PUBLICATION ${ident(PUBLICATION)} DROP TABLES IN SCHEMA ${ident(schemas.live)}`);
    if (!options.keepSchema) await admin.query(`DROP SCHEMA IF EXISTS ${ident(schemas.live)} CASCADE`);
    await admin.query(`DROP SCHEMA IF EXISTS ${ident(schemas.swap)} CASCADE`);
  });
  logger.info({ database: db.name, schema: schemas.live, kept: options.keepSchema }, options.keepSchema ? 'sync schema kept' : 'sync schema dropped');
}

/**
 * Removes what provisionDatabase made; every step tolerates a half-made or already
 * removed state, so an interrupted create or delete can simply be run again.
 * With `keepDatabase` the database and its reader stay; the slot always goes, since
 * a slot nobody reads pins WAL on the server forever.
 */
export async function dropDatabase(db: SyncDatabase, options: { keepDatabase: boolean }, logger: Logger): Promise<void> {
  const exists = await withClient(db.adminUrl, async (admin) => {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.name]);
    return rowCount === 1;
  });
  if (exists) {
    await withClient(withDatabase(db.adminUrl, db.name), (admin) => dropSlot(admin, db.name));
  }
  if (options.keepDatabase) {
    logger.info({ database: db.name }, 'sync database kept; replication slot dropped');
    return;
  }
  await withClient(db.adminUrl, async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${ident(db.name)} WITH (FORCE)`);
    await admin.query(`DROP ROLE IF EXISTS ${ident(db.role)}`);
  });
  logger.info({ database: db.name }, 'sync database dropped');
}

/**
 * Readers must not be able to take the connection slots the service itself needs (its
 * writers, the decoder's lookups, the proxy's write-through). On a server where Tributary's
 * role gets no reserved slots (superuser_reserved_connections for a superuser, PostgreSQL
 * 16's reserved_connections with pg_use_reserved_connections otherwise), say so at start.
 */
export async function reservedSlots(adminUrl: string): Promise<number> {
  return withClient(adminUrl, async (admin) => {
    const { rows } = await admin.query<{ slots: number }>(
      `SELECT CASE WHEN r.rolsuper THEN current_setting('superuser_reserved_connections')::int
                     + coalesce(current_setting('reserved_connections', true)::int, 0)
                   WHEN pg_has_role(current_user, 'pg_use_reserved_connections', 'MEMBER')
                     THEN coalesce(current_setting('reserved_connections', true)::int, 0)
                   ELSE 0 END AS slots
         FROM pg_roles r WHERE r.rolname = current_user`,
    );
    return rows[0]?.slots ?? 0;
  }).catch(() => 0);
}

/** At start: a warning when the sync databases' server reserves too few connections for Tributary's role. */
export async function warnFewReserved(adminUrl: string, logger: Logger): Promise<void> {
  const reserved = await reservedSlots(adminUrl);
  if (reserved >= 20) return;
  logger.warn(
    { reserved },
    "the sync databases' server reserves fewer than 20 connections for Tributary's role: readers could take the slots its syncs, proxy and decoder need (set reserved_connections and grant pg_use_reserved_connections, or superuser_reserved_connections for a superuser)",
  );
}

/**
 * PostgreSQL lets every role open every database that grants CONNECT to PUBLIC, and
 * make TEMP tables there; on a pool server that would let one sync's reader into the
 * maintenance databases. Run at start for the configured server and when a server joins
 * the pool; idempotent. Customer-owned servers are left as their owners set them (the
 * README says what to revoke there).
 */
export async function hardenServer(adminUrl: string, extraDatabases: string[] = []): Promise<void> {
  await withClient(adminUrl, async (admin) => {
    // Every process of a fleet runs this at start: two REVOKEs of one database at once fail
    // with "tuple concurrently updated", so they take turns (the lock ends with the transaction).
    await admin.query('BEGIN');
    try {
      await admin.query("SELECT pg_advisory_xact_lock(hashtext('tributary: harden server'))");
      const { rows } = await admin.query<{ datname: string }>(
        "SELECT datname FROM pg_database WHERE datname = ANY($1) OR datname IN ('postgres', 'template1')",
        [extraDatabases],
      );
      for (const { datname } of rows) {
        await admin.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${ident(datname)} FROM PUBLIC`);
      }
      await admin.query('COMMIT');
    } catch (error) {
      await admin.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/** A customer-owned server must allow logical decoding and let us create databases, roles and slots. */
export async function checkServer(adminUrl: string): Promise<void> {
  const problems = missingRights(await readServerFacts(adminUrl, 'database_url'));
  if (problems.length > 0) {
    throw new TributaryError('unprocessable', `database_url cannot host a sync database: ${problems.join('; ')}`);
  }
}
