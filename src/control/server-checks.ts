import { slotWalKeepMb } from '../db/slots.ts';
import { withClient } from '../db/sql.ts';
import { TributaryError } from '../errors.ts';
import { connectFailure } from './server-url.ts';

/** What decides whether a server can hold sync databases, as its admin role sees it. */
export interface ServerFacts {
  walLevel: string;
  superuser: boolean;
  createdb: boolean;
  createrole: boolean;
  replication: boolean;
  maxSlots: number;
  usedSlots: number;
  maxSenders: number;
  usedSenders: number;
  /** max_slot_wal_keep_size in MB; -1: no bound. */
  slotWalKeepMb: number;
}

interface FactsRow {
  wal_level: string;
  rolsuper: boolean;
  rolcreatedb: boolean;
  rolcreaterole: boolean;
  rolreplication: boolean;
  max_slots: number;
  used_slots: number;
  max_senders: number;
  used_senders: number;
}

/**
 * Reads a server's facts. A connection that fails is a 422 `cannot connect to <what>: <reason>`,
 * the reason from connectFailure's fixed list: the driver's message may echo what the server
 * or the network said.
 */
export async function readServerFacts(adminUrl: string, what: string): Promise<ServerFacts> {
  try {
    return await withClient(adminUrl, async (admin) => {
      const { rows } = await admin.query<FactsRow>(
        `SELECT current_setting('wal_level') AS wal_level, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication,
                current_setting('max_replication_slots')::int AS max_slots,
                (SELECT count(*)::int FROM pg_replication_slots) AS used_slots,
                current_setting('max_wal_senders')::int AS max_senders,
                (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'walsender') AS used_senders
           FROM pg_roles r WHERE r.rolname = current_user`,
      );
      const row = rows[0];
      if (!row) throw new Error('cannot read the current role');
      return {
        walLevel: row.wal_level,
        superuser: row.rolsuper,
        createdb: row.rolcreatedb,
        createrole: row.rolcreaterole,
        replication: row.rolreplication,
        maxSlots: row.max_slots,
        usedSlots: row.used_slots,
        maxSenders: row.max_senders,
        usedSenders: row.used_senders,
        slotWalKeepMb: await slotWalKeepMb(admin),
      };
    });
  } catch (cause) {
    throw new TributaryError('unprocessable', `cannot connect to ${what}: ${connectFailure(cause)}`, { cause });
  }
}

/**
 * What a sync database needs of its server: logical decoding, and a role that may create
 * databases and roles (the database and its reader) and read a slot (the decoder).
 */
export function missingRights(facts: ServerFacts): string[] {
  return [
    facts.walLevel !== 'logical' && `wal_level is ${facts.walLevel}, it must be logical`,
    !facts.superuser && !facts.createdb && 'the role lacks CREATEDB',
    !facts.superuser && !facts.createrole && 'the role lacks CREATEROLE',
    !facts.superuser && !facts.replication && 'the role lacks REPLICATION',
  ].filter((p): p is string => typeof p === 'string');
}

/**
 * Each sync database holds one replication slot and, while its decoder runs, one WAL sender:
 * a pool server must have room for `syncs` more of each.
 */
export function missingRoom(facts: ServerFacts, syncs: number): string[] {
  const slots = Math.max(0, facts.maxSlots - facts.usedSlots);
  const senders = Math.max(0, facts.maxSenders - facts.usedSenders);
  return [
    slots < syncs && `max_replication_slots (${facts.maxSlots}, ${facts.usedSlots} used) leaves room for ${slots} more slots, not ${syncs}`,
    senders < syncs && `max_wal_senders (${facts.maxSenders}, ${facts.usedSenders} used) leaves room for ${senders} more WAL senders, not ${syncs}`,
  ].filter((p): p is string => typeof p === 'string');
}

/**
 * Refuses a pool server that cannot hold `syncs` more sync databases: a 422 that lists every
 * reason (connection, wal_level, slots, WAL senders, rights).
 */
export async function checkPoolServer(adminUrl: string, syncs: number): Promise<ServerFacts> {
  const facts = await readServerFacts(adminUrl, 'the server');
  const problems = [...missingRights(facts), ...missingRoom(facts, syncs)];
  if (problems.length > 0) throw new TributaryError('unprocessable', `url cannot host sync databases: ${problems.join('; ')}`);
  return facts;
}

/**
 * What a server's WAL bound means for its syncs, in words, or undefined when it has one. Each
 * sync's slot keeps the server's WAL from the point its decoder has reached; without
 * max_slot_wal_keep_size, a decoder down or behind keeps it all, and one stuck decoder can
 * fill the disk every other database of the server lives on.
 */
export function walBoundWarning(slotWalKeepMb: number | null): string | undefined {
  if (slotWalKeepMb === null || slotWalKeepMb >= 0) return undefined;
  return "max_slot_wal_keep_size is -1 (no bound): a sync's replication slot whose decoder is down or behind keeps every byte of WAL from there on, and one stuck decoder can fill this server's disk; set it (docs/operations.md#wal-retention)";
}

/** The server's max_slot_wal_keep_size in MB (-1: no bound); undefined when it cannot be read now. */
export async function readWalBound(adminUrl: string): Promise<number | undefined> {
  try {
    return await withClient(adminUrl, async (admin) => {
      return await slotWalKeepMb(admin);
    });
  } catch {
    return undefined;
  }
}
