import { execFile } from 'node:child_process';
import { chown, mkdir, readdir, rm, stat, writeFile, appendFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { withDatabase } from '../../src/db/sql.ts';
import { createLogger } from '../../src/log.ts';
import { freePort } from './ports.ts';
import { query } from './postgres.ts';

const run = promisify(execFile);

/** A server to make a standby of: its superuser URL, port and folder (`<dir>/pg`, `<dir>/pg-superuser-password`). */
export interface Primary {
  adminUrl: string;
  port: number;
  dir: string;
}

/** A hot standby of a primary, streaming from it through a physical slot, syncing its failover slots. */
export interface Standby {
  adminUrl: string;
  port: number;
  /** Its folder, as a Primary's. */
  dir: string;
  databaseUrl(database: string): string;
  /** Ends recovery: the standby becomes a primary (pg_promote, waiting for it). */
  promote(): Promise<void>;
  /** A fast shutdown; its folder goes unless `keep`. */
  stop(keep?: boolean): Promise<void>;
}

/**
 * Makes a standby of `primary` the way an operator does without pg_basebackup (the npm
 * package ships none): a physical slot for it, a low-level base backup (pg_backup_start, a
 * copy of the data folder, pg_backup_stop's backup label), then `standby.signal` and the
 * settings of a standby that syncs failover slots (PostgreSQL 17: `sync_replication_slots`,
 * `hot_standby_feedback`, a `primary_conninfo` with a database). The primary is told to hold
 * logical decoding back until the standby has the WAL (`synchronized_standby_slots`).
 */
export async function startStandby(primary: Primary, name = 'standby1'): Promise<Standby> {
  await query(primary.adminUrl, 'SELECT pg_create_physical_replication_slot($1, true)', [name]);
  try {
    return await standbyOf(primary, name);
  } catch (error) {
    await query(primary.adminUrl, 'SELECT pg_drop_replication_slot($1)', [name]).catch(() => undefined);
    throw error;
  }
}

async function standbyOf(primary: Primary, name: string): Promise<Standby> {
  const dir = `${primary.dir}-${name}`;
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true, mode: 0o711 });
  const from = path.join(primary.dir, 'pg');
  const to = path.join(dir, 'pg');
  const owner = await stat(from);
  const session = new pg.Client({ connectionString: primary.adminUrl });
  await session.connect();
  try {
    await session.query("SELECT pg_backup_start('tributary standby', true)");
    // cp -a keeps the owner and modes the server insists on.
    await run('cp', ['-a', from, to]);
    for (const file of ['postmaster.pid', 'postmaster.opts', 'server.log', 'backup_label']) await rm(path.join(to, file), { force: true });
    for (const folder of ['pg_replslot', 'pg_wal']) {
      for (const entry of await readdir(path.join(to, folder))) {
        if (entry !== 'archive_status') await rm(path.join(to, folder, entry), { recursive: true, force: true });
      }
    }
    const { rows } = await session.query<{ labelfile: string }>('SELECT labelfile FROM pg_backup_stop(true)');
    await writeFile(path.join(to, 'backup_label'), rows[0]!.labelfile);
  } finally {
    await session.end();
  }
  await run('cp', ['-a', path.join(primary.dir, 'pg-superuser-password'), path.join(dir, 'pg-superuser-password')]);
  const password = new URL(primary.adminUrl).password;
  const conninfo = `host=127.0.0.1 port=${primary.port} user=postgres password=${decodeURIComponent(password)} dbname=postgres application_name=${name}`;
  await writeFile(path.join(to, 'standby.signal'), '');
  await appendFile(
    path.join(to, 'postgresql.auto.conf'),
    [
      `primary_conninfo = '${conninfo}'`,
      `primary_slot_name = '${name}'`,
      'hot_standby_feedback = on',
      'sync_replication_slots = on',
      "synchronized_standby_slots = ''",
      '',
    ].join('\n'),
  );
  for (const file of ['backup_label', 'standby.signal', 'postgresql.auto.conf']) await chown(path.join(to, file), owner.uid, owner.gid);
  const port = await freePort();
  // A hot standby needs at least the primary's connection slots.
  const [{ max }] = (await query<{ max: string }>(primary.adminUrl, "SELECT current_setting('max_connections') AS max")) as [{ max: string }];
  const server = await startEmbeddedPostgres({ dir, port, logger: createLogger({ level: 'warn' }), maxConnections: Number(max) });
  // Only now, with the standby up: from here the primary's decoders wait for it (a standby that
  // never came would hold every one back).
  await query(primary.adminUrl, `ALTER SYSTEM SET synchronized_standby_slots = '${name}'`);
  await query(primary.adminUrl, 'SELECT pg_reload_conf()');
  let running = true;
  return {
    adminUrl: server.adminUrl,
    port,
    dir,
    databaseUrl: (database) => withDatabase(server.adminUrl, database),
    async promote() {
      await query(server.adminUrl, 'SELECT pg_promote(true, 60)');
    },
    async stop(keep = false) {
      if (running) await server.stop('fast');
      running = false;
      if (!keep) await rm(dir, { recursive: true, force: true });
    },
  };
}
