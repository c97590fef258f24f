import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { withDatabase } from '../../src/db/sql.ts';
import { createLogger } from '../../src/log.ts';
import { freePort } from './ports.ts';

/** Another PostgreSQL server beside the test run's own: a second member of a server pool. */
export interface SecondServer {
  /** Superuser URL of its `postgres` database. */
  adminUrl: string;
  port: number;
  /** Its folder: the cluster is in `<dir>/pg`, its superuser password in `<dir>/pg-superuser-password`. */
  dir: string;
  /** The admin URL of another database on this server. */
  databaseUrl(database: string): string;
  /** A fast shutdown (`pg_ctl stop -m fast`) that keeps the data folder: an outage. */
  pause(): Promise<void>;
  /** Starts it again on the same port, with the same data and password. */
  resume(): Promise<void>;
  /** An immediate shutdown (a crash: the postmaster and its processes end at once). */
  crash(): Promise<void>;
  /** With `tmpfsMb`: fills its disk but for about `leaveBytes` (a file beside the cluster; again after more was freed). */
  fill(leaveBytes: number): Promise<void>;
  /** The space every fill() took is free again. */
  unfill(): Promise<void>;
  /**
   * Removes the relation-cache init files (`pg_internal.init`), as a change to the catalogs
   * does: the next backend of each database must write its file again, and on a full disk
   * that backend ends at once (FATAL "could not write init file"). Frees their space: fill again.
   */
  dropInitFiles(): Promise<void>;
  stop(): Promise<void>;
}

export interface SecondServerOptions {
  /** `logical` by default; `replica` makes a server that cannot hold sync databases. */
  walLevel?: 'logical' | 'replica';
  /** Connection slots (default 100: a test needs few). */
  maxConnections?: number;
  /** max_slot_wal_keep_size in MB (default: the service's, SLOT_WAL_KEEP_MB). */
  slotWalKeepMb?: number;
  /** Its folder on a tmpfs of this size (root only): a disk that fill() can make full. */
  tmpfsMb?: number;
}

/**
 * Folders of servers still running. A test file that ends without stopping one (a failed
 * set-up) leaves no server behind: its postmaster gets SIGQUIT (an immediate shutdown),
 * then the folder goes.
 */
const folders = new Set<string>();
/** Folders that are tmpfs mounts: unmounted when done. */
const mounts = new Set<string>();
process.on('exit', () => {
  for (const dir of folders) {
    try {
      const pid = Number(readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (pid > 0) process.kill(pid, 'SIGQUIT');
    } catch {
      // not running
    }
    if (mounts.has(dir)) {
      try {
        execFileSync('umount', ['-l', dir]);
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * A PostgreSQL server of its own (embedded binaries: initdb, then pg_ctl on a free port and
 * its own data folder), as the test run's is made (test/run.ts): `wal_level=logical`, 500
 * replication slots and WAL senders, a superuser with a random password. Stop it when done.
 */
export async function startSecondServer(options: SecondServerOptions = {}): Promise<SecondServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tributary-second-pg-'));
  folders.add(dir);
  if (options.tmpfsMb) {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${options.tmpfsMb}m,mode=0711`, 'tmpfs', dir]);
    mounts.add(dir);
  }
  const filler = path.join(dir, 'filler');
  const port = await freePort();
  const start = () =>
    startEmbeddedPostgres({
      dir,
      port,
      logger: createLogger({ level: 'warn' }),
      maxConnections: options.maxConnections ?? 100,
      walLevel: options.walLevel,
      slotWalKeepMb: options.slotWalKeepMb,
    });
  let server = await start();
  let running = true;
  let fills = 0;
  return {
    adminUrl: server.adminUrl,
    port,
    dir,
    databaseUrl: (database) => withDatabase(server.adminUrl, database),
    async pause() {
      await server.stop('fast');
      running = false;
    },
    async fill(leaveBytes) {
      const { bavail, bsize } = statfsSync(dir);
      // A write that meets the end of the disk has filled it, which is what was asked.
      await writeFile(`${filler}-${fills++}`, Buffer.alloc(Math.max(0, bavail * bsize - leaveBytes))).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOSPC') throw error;
      });
    },
    async unfill() {
      while (fills > 0) await rm(`${filler}-${--fills}`, { force: true });
    },
    async dropInitFiles() {
      const cluster = path.join(dir, 'pg');
      const folders = ['global', ...readdirSync(path.join(cluster, 'base')).map((oid) => path.join('base', oid))];
      for (const folder of folders) await rm(path.join(cluster, folder, 'pg_internal.init'), { force: true });
    },
    async crash() {
      await server.stop('immediate');
      running = false;
    },
    async resume() {
      server = await start();
      running = true;
    },
    async stop() {
      if (running) await server.stop('fast');
      if (mounts.delete(dir)) execFileSync('umount', ['-l', dir]);
      await rm(dir, { recursive: true, force: true });
      folders.delete(dir);
    },
  };
}
