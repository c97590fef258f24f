import type pg from 'pg';
import { inTransaction, withClient } from '../db/sql.ts';
import { notFound, TributaryError } from '../errors.ts';
import type { LookupAll } from '../http/address.ts';
import { newServerId } from '../ids.ts';
import type { Logger } from '../log.ts';
import { hardenServer, reservedSlots } from './provisioner.ts';
import { checkPoolServer, readWalBound, walBoundWarning } from './server-checks.ts';
import { checkPoolServerUrl, serverEndpoints } from './server-url.ts';
import type { SecretBox } from './secrets.ts';

/** A member of the pool of servers that hold sync databases (sql/20_servers.sql). */
export interface ServerRecord {
  id: string;
  region: string;
  /** Syncs it may hold. */
  capacity: number;
  /** Syncs it holds, in any state (a sync being created or deleted still has its database there). */
  syncs: number;
  /** A draining server keeps its syncs and gets no new ones. */
  draining: boolean;
  /** The server named by the configuration: its URL is read from there, not stored. */
  configured: boolean;
  /** Its max_slot_wal_keep_size in MB as last read (when added, changed, or at a start); -1: no bound; null: not read yet. */
  slotWalKeepMb: number | null;
  /** Free space of the disk its data lives on, where the service can read it (the embedded server); null elsewhere. */
  freeDiskBytes: number | null;
  createdAt: Date;
}

/** Room for more syncs: never below zero, even after the capacity was lowered under the count. */
export const freeOf = (server: Pick<ServerRecord, 'capacity' | 'syncs'>) => Math.max(0, server.capacity - server.syncs);

/** Where a sync database's server is reached, as its admin. */
export interface ServerTarget {
  url: string;
  configured: boolean;
}

export interface ServerPoolOptions {
  /** The control database. */
  pool: pg.Pool;
  box: SecretBox;
  /** Admin URL of the configured server (TRIBUTARY_TARGET_DATABASE_URL, else the control database's). */
  configuredUrl: string;
  /** Databases of the service's own (the control database) that no reader may open, on any member. */
  protectedDatabases?: string[];
  lookup?: LookupAll;
  logger: Logger;
}

interface ServerRow {
  id: string;
  region: string;
  capacity: number;
  syncs: number;
  draining: boolean;
  configured: boolean;
  slot_wal_keep_mb: string | null;
  free_disk_bytes: string | null;
  created_at: Date;
}

const SELECT_SERVERS = `SELECT s.id, s.region, s.capacity, s.draining, s.url_enc IS NULL AS configured, s.slot_wal_keep_mb,
         CASE WHEN s.disk_read_at > now() - interval '5 minutes' THEN s.free_disk_bytes END AS free_disk_bytes, s.created_at,
         (SELECT count(*)::int FROM syncs y WHERE y.server_id = s.id) AS syncs
    FROM servers s`;

const toRecord = (row: ServerRow): ServerRecord => ({
  id: row.id,
  region: row.region,
  capacity: row.capacity,
  syncs: row.syncs,
  draining: row.draining,
  configured: row.configured,
  slotWalKeepMb: row.slot_wal_keep_mb === null ? null : Number(row.slot_wal_keep_mb),
  freeDiskBytes: row.free_disk_bytes === null ? null : Number(row.free_disk_bytes),
  createdAt: row.created_at,
});

/** Associated data binds a sealed URL to its row. */
const aad = (id: string) => `servers:${id}:url`;

/** The region's members, best first: most room, then the oldest. */
async function regionMembers(db: pg.Pool | pg.PoolClient, region: string): Promise<ServerRecord[]> {
  const { rows } = await db.query<ServerRow>(`${SELECT_SERVERS} WHERE s.region = $1`, [region]);
  return rows.map(toRecord).sort((a, b) => freeOf(b) - freeOf(a) || a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id));
}

/** The member a new sync of `region` goes to, or a 422 naming the region. */
async function choose(db: pg.Pool | pg.PoolClient, region: string): Promise<ServerRecord> {
  const members = await regionMembers(db, region);
  // One answer for a region without servers and one whose servers are full: an account
  // learns neither the deployment's other regions nor which names are regions at all.
  const open = members.find((server) => !server.draining && freeOf(server) > 0);
  if (!open) throw new TributaryError('unprocessable', `region ${region}: no server in this region can take a new sync`);
  return open;
}

/**
 * Places a new sync inside the transaction that inserts it: the region's rows are locked
 * first, then counted, so two creates cannot both take a server's last place. The count is a
 * statement of its own: under READ COMMITTED it then sees every placement committed while this
 * one waited for the lock.
 */
export async function placeSync(tx: pg.PoolClient, region: string): Promise<string> {
  await tx.query('SELECT id FROM servers WHERE region = $1 ORDER BY id FOR UPDATE', [region]);
  return (await choose(tx, region)).id;
}

/**
 * The pool: its members, what checks a new one, and where each sync's server is reached.
 * Members' URLs never change, so each is decrypted once per process.
 */
export class ServerPool {
  private readonly targets = new Map<string, ServerTarget>();

  constructor(private readonly options: ServerPoolOptions) {}

  async list(): Promise<ServerRecord[]> {
    const { rows } = await this.options.pool.query<ServerRow>(`${SELECT_SERVERS} ORDER BY s.created_at, s.id`);
    return rows.map(toRecord);
  }

  async get(id: string): Promise<ServerRecord | undefined> {
    const { rows } = await this.options.pool.query<ServerRow>(`${SELECT_SERVERS} WHERE s.id = $1`, [id]);
    return rows[0] && toRecord(rows[0]);
  }

  /**
   * Where a sync's server is reached: the configured server for its member (and for a sync made
   * before the pool, whose server_id is still null), else the member's own sealed URL.
   */
  async target(serverId: string | null): Promise<ServerTarget> {
    if (serverId === null) return { url: this.options.configuredUrl, configured: true };
    const known = this.targets.get(serverId);
    if (known) return known;
    const { rows } = await this.options.pool.query<{ url_enc: string | null }>('SELECT url_enc FROM servers WHERE id = $1', [serverId]);
    if (!rows[0]) throw new Error(`server ${serverId} not found`);
    const sealed = rows[0].url_enc;
    const target =
      sealed === null
        ? { url: this.options.configuredUrl, configured: true }
        : { url: this.options.box.decrypt(sealed, aad(serverId)).reveal(), configured: false };
    this.targets.set(serverId, target);
    return target;
  }

  /** Every member's admin URL: servers a tenant's database_url may never name. */
  async urls(): Promise<string[]> {
    const { rows } = await this.options.pool.query<{ id: string }>('SELECT id FROM servers');
    return [this.options.configuredUrl, ...(await Promise.all(rows.map(async ({ id }) => (await this.target(id)).url)))];
  }

  /** A 422 naming the region when a new sync could not be placed there; read without locks, before anything is asked upstream. */
  async precheck(region: string): Promise<void> {
    await choose(this.options.pool, region);
  }

  /**
   * At start: an empty pool gets the configured server as its first member, in `region`, with
   * a capacity of the server's max_replication_slots (one slot per sync). Syncs made before
   * the pool, on the configured server, are its. Several processes may start at once: the
   * unique index on the configured member lets one insert win.
   */
  async ensureConfigured(region: string): Promise<void> {
    const { pool } = this.options;
    const { rows } = await pool.query<{ any: boolean }>('SELECT EXISTS (SELECT 1 FROM servers) AS any');
    if (!rows[0]?.any) {
      const slots = await withClient(this.options.configuredUrl, async (admin) => {
        const { rows: setting } = await admin.query<{ slots: number }>("SELECT current_setting('max_replication_slots')::int AS slots");
        return setting[0]?.slots ?? 0;
      });
      const { rowCount } = await pool.query(
        'INSERT INTO servers (id, region, capacity) SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM servers) ON CONFLICT DO NOTHING',
        [newServerId(), region, slots],
      );
      if (rowCount === 1) this.options.logger.info({ region, capacity: slots }, 'the configured server joined the pool of target servers');
    }
    await pool.query(
      `UPDATE syncs SET server_id = c.id FROM servers c
        WHERE c.url_enc IS NULL AND syncs.server_id IS NULL AND syncs.database_server_enc IS NULL`,
    );
    // Read again at each start: an operator may have set the bound since (docs/operations.md#wal-retention).
    // The configured server is needed to start anyway; a member that is away must not hold the start up.
    const { rows: members } = await pool.query<{ id: string; configured: boolean }>('SELECT id, url_enc IS NULL AS configured FROM servers');
    for (const { id, configured } of members) {
      const read = this.readWalBound(id).catch((error: unknown) => this.options.logger.debug({ err: error, server: id }, 'could not read its WAL bound'));
      if (configured) await read;
    }
  }

  /** Reads a member's max_slot_wal_keep_size into the pool, warning when it has none; a server away keeps the last value. */
  private async readWalBound(id: string): Promise<void> {
    const mb = await readWalBound((await this.target(id)).url);
    if (mb === undefined) return;
    await this.options.pool.query('UPDATE servers SET slot_wal_keep_mb = $2 WHERE id = $1', [id, mb]);
    const unbounded = walBoundWarning(mb);
    if (unbounded) this.options.logger.warn({ server: id }, unbounded);
  }

  /**
   * A new member, once it has proved it can hold `capacity` sync databases: its URL's shape
   * (400), a host that resolves (422), not already a member (409), a connection, logical
   * decoding, room for the slots and WAL senders, the rights (422 saying which). Then readers
   * are shut out of its maintenance databases, as on the configured server.
   */
  async add(input: { url: string; region: string; capacity: number }): Promise<ServerRecord> {
    const { logger } = this.options;
    const endpoints = await checkPoolServerUrl(input.url, this.options.lookup);
    await this.refuseMember(endpoints);
    const facts = await checkPoolServer(input.url, input.capacity);
    try {
      await hardenServer(input.url, this.options.protectedDatabases);
    } catch (cause) {
      throw new TributaryError(
        'unprocessable',
        'url: cannot revoke CONNECT on the databases postgres and template1 from PUBLIC (the role must own them, or be superuser)',
        { cause },
      );
    }
    const reserved = await reservedSlots(input.url);
    if (reserved < 20)
      logger.warn({ reserved }, "a new pool server reserves fewer than 20 connections for Tributary's role: readers could take the slots its syncs need");
    const id = newServerId();
    const record = await inTransaction(this.options.pool, async (tx) => {
      // One add at a time past this point, so two adds of one server cannot both pass.
      await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('servers', 0))");
      await this.refuseMember(endpoints, tx);
      await tx.query('INSERT INTO servers (id, region, capacity, url_enc, slot_wal_keep_mb) VALUES ($1, $2, $3, $4, $5)', [
        id,
        input.region,
        input.capacity,
        this.options.box.encrypt(input.url, aad(id)),
        facts.slotWalKeepMb,
      ]);
      const { rows } = await tx.query<ServerRow>(`${SELECT_SERVERS} WHERE s.id = $1`, [id]);
      return toRecord(rows[0]!);
    });
    logger.info({ server: id, region: input.region, capacity: input.capacity }, 'server added to the pool');
    const unbounded = walBoundWarning(facts.slotWalKeepMb);
    if (unbounded) logger.warn({ server: id }, unbounded);
    return record;
  }

  /** A 409 when `endpoints` lead to a member already (the same address and port is the same server). */
  private async refuseMember(endpoints: string[], db: pg.Pool | pg.PoolClient = this.options.pool): Promise<void> {
    const { rows } = await db.query<{ id: string }>('SELECT id FROM servers ORDER BY created_at, id');
    for (const { id } of rows) {
      const member = await serverEndpoints((await this.target(id)).url, this.options.lookup);
      if (member.some((endpoint) => endpoints.includes(endpoint))) throw new TributaryError('conflict', `url: this server is already in the pool as ${id}`);
    }
  }

  /**
   * Changes a member's capacity or draining. A raised capacity is checked first: the server
   * must have room for the slots and WAL senders of every sync the new capacity adds.
   */
  async update(id: string, change: { capacity?: number; draining?: boolean }): Promise<ServerRecord> {
    const current = await this.get(id);
    if (!current) throw notFound(`server ${id}`);
    if (change.capacity !== undefined && change.capacity > current.capacity) {
      // The syncs it holds have their slots already; the rest of the new capacity needs room.
      const more = change.capacity - current.syncs;
      if (more > 0) await checkPoolServer((await this.target(id)).url, more);
    }
    await this.readWalBound(id);
    const { rows } = await this.options.pool.query<ServerRow>(
      `WITH changed AS (
         UPDATE servers SET capacity = coalesce($2, capacity), draining = coalesce($3, draining) WHERE id = $1 RETURNING *
       )
       SELECT s.id, s.region, s.capacity, s.draining, s.url_enc IS NULL AS configured, s.slot_wal_keep_mb,
              CASE WHEN s.disk_read_at > now() - interval '5 minutes' THEN s.free_disk_bytes END AS free_disk_bytes, s.created_at,
              (SELECT count(*)::int FROM syncs y WHERE y.server_id = s.id) AS syncs
         FROM changed s`,
      [id, change.capacity ?? null, change.draining ?? null],
    );
    if (!rows[0]) throw notFound(`server ${id}`);
    this.options.logger.info({ server: id, ...change }, 'pool server changed');
    return toRecord(rows[0]);
  }

  /** Removes an empty member; a 409 while it holds syncs (the configured one too). */
  async remove(id: string): Promise<void> {
    await inTransaction(this.options.pool, async (tx) => {
      const { rows } = await tx.query<{ id: string }>('SELECT id FROM servers WHERE id = $1 FOR UPDATE', [id]);
      if (!rows[0]) throw notFound(`server ${id}`);
      const { rows: held } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM syncs WHERE server_id = $1', [id]);
      const syncs = held[0]?.n ?? 0;
      if (syncs > 0) {
        throw new TributaryError('conflict', `server ${id} holds ${syncs} sync${syncs === 1 ? '' : 's'}: delete them first (draining stops new ones coming)`);
      }
      await tx.query('DELETE FROM servers WHERE id = $1', [id]);
    });
    this.targets.delete(id);
    this.options.logger.info({ server: id }, 'server removed from the pool');
  }
}
