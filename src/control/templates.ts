import { createHash } from 'node:crypto';
import type pg from 'pg';
import { ident, withClient, withDatabase } from '../db/sql.ts';
import type { Logger } from '../log.ts';
import type { MigrationSet } from '../syncdb/migrate.ts';

/**
 * What a kind's new databases hold before any sync writes to them: the bookkeeping steps and,
 * through `prepare`, the kind's own tables. `version` names what `prepare` builds (a kind
 * whose tables change says so by a new version).
 */
export interface TemplateSpec {
  kind: string;
  version: string;
  prepare?: (adminUrl: string) => Promise<void>;
}

const PREFIX = 'tributary_template_';

/** The template's name: its kind and a digest of every step that builds it. */
export function templateName(spec: TemplateSpec, migrations: MigrationSet[]): string {
  const steps = migrations.map((set) => [set.scope, set.migrations.map((m) => `${m.version}:${m.name}`)]);
  const digest = createHash('sha256')
    .update(JSON.stringify([spec.kind, spec.version, steps]))
    .digest('hex')
    .slice(0, 12);
  return `${PREFIX}${spec.kind}_${digest}`;
}

/**
 * Builds the server's template database for a kind, once per server and release, so a new
 * sync database is a file copy of it (`CREATE DATABASE … TEMPLATE`). Building a Stripe
 * database table by table was some hundred tables of catalog changes, which every logical
 * walsender of the server decodes: on a server of hundreds of syncs each new one cost seconds
 * of CPU per walsender, and 500 took most of an hour to make. A copy is one WAL record.
 *
 * Called when a copy found no template `name` (templateName) of `kind`. A template is complete
 * once it takes no connections: it is built under another name and renamed when done, so a
 * crash mid-build leaves only a `…_new` that the next build drops. Templates of the kind from
 * earlier releases are dropped. Builders on one server take turns (an advisory lock), and one
 * that finds the template finished meanwhile leaves it; copies run side by side.
 */
export async function buildTemplate(
  adminUrl: string,
  kind: string,
  name: string,
  build: (templateUrl: string) => Promise<void>,
  logger: Logger,
): Promise<void> {
  await withClient(adminUrl, async (admin) => {
    await admin.query('SELECT pg_advisory_lock($1)', [lockKey(kind)]);
    try {
      const finished = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1 AND NOT datallowconn', [name]);
      if (finished.rowCount === 1) return;
      const building = `${name}_new`;
      await admin.query(`DROP DATABASE IF EXISTS ${ident(building)}`);
      await admin.query(`CREATE DATABASE ${ident(building)} TEMPLATE template0 ENCODING 'UTF8'${await fileCopy(admin)}`);
      await admin.query(`REVOKE ALL ON DATABASE ${ident(building)} FROM PUBLIC`);
      await build(withDatabase(adminUrl, building));
      await admin.query(`ALTER DATABASE ${ident(building)} ALLOW_CONNECTIONS false`);
      await admin.query(`ALTER DATABASE ${ident(building)} RENAME TO ${ident(name)}`);
      const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE starts_with(datname, $1) AND datname <> $2', [
        `${PREFIX}${kind}_`,
        name,
      ]);
      for (const old of rows) await admin.query(`DROP DATABASE IF EXISTS ${ident(old.datname)}`);
      logger.info({ template: name, replaced: rows.map((r) => r.datname) }, 'sync database template built');
    } finally {
      await admin.query('SELECT pg_advisory_unlock($1)', [lockKey(kind)]).catch(() => undefined);
    }
  });
}

const lockKey = (kind: string) => `${BigInt.asIntN(64, BigInt(`0x${createHash('sha256').update(`tributary template ${kind}`).digest('hex').slice(0, 16)}`))}`;

/**
 * How a new database is copied from its template. PostgreSQL 15 and later copy it through
 * the WAL by default: some 8 MB of WAL that every logical walsender of the server then reads,
 * so on a server of hundreds of syncs each new one cost seconds of CPU hundreds of times over.
 * FILE_COPY writes one record (at the price of a checkpoint).
 */
export async function fileCopy(admin: pg.Client): Promise<string> {
  const { rows } = await admin.query<{ version: number }>("SELECT current_setting('server_version_num')::int AS version");
  return rows[0]!.version >= 150000 ? ' STRATEGY FILE_COPY' : '';
}
