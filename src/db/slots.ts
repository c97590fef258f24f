import type pg from 'pg';
import { ident } from './sql.ts';

/** PostgreSQL 17 made failover slots: a standby with `sync_replication_slots` keeps a copy. */
const FAILOVER_SINCE = 170_000;

async function hasFailoverSlots(db: pg.ClientBase | pg.Pool): Promise<boolean> {
  const { rows } = await db.query<{ version: number }>("SELECT current_setting('server_version_num')::int AS version");
  return rows[0]!.version >= FAILOVER_SINCE;
}

/**
 * A sync database's logical slot, made for the decoder (pgoutput); returns where it starts.
 * A failover slot where the server has them, so that a standby that syncs slots holds it too
 * and a promoted standby streams on from it (docs/operations.md#a-pool-server-with-a-standby).
 */
export async function createSlot(admin: pg.ClientBase, slot: string): Promise<string> {
  const failover = await hasFailoverSlots(admin);
  const { rows } = await admin.query<{ lsn: string }>(
    failover
      ? "SELECT lsn::text AS lsn FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
      : "SELECT lsn::text AS lsn FROM pg_create_logical_replication_slot($1, 'pgoutput')",
    [slot],
  );
  return rows[0]!.lsn;
}

/**
 * The replication command that makes an existing slot a failover slot (one made before the
 * service made them, or on a server since upgraded to 17); none when it is one, or cannot be.
 * Run on the replication connection before the slot is streamed.
 */
export async function failoverCommand(db: pg.ClientBase | pg.Pool, slot: string): Promise<string | undefined> {
  if (!(await hasFailoverSlots(db))) return undefined;
  const { rows } = await db.query<{ failover: boolean }>('SELECT failover FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  return rows[0]?.failover === false ? `ALTER_REPLICATION_SLOT ${ident(slot)} ( FAILOVER true )` : undefined;
}

/**
 * Drops the slot if it is there, ending the WAL sender that holds it first. Each attempt ends
 * it again: its decoder may have come back between. `signal` gives up between attempts.
 */
export async function dropSlot(admin: pg.ClientBase, slot: string, signal?: AbortSignal): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    // An active walsender holds the slot; end it first, or the drop fails.
    await admin.query('SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL', [slot]);
    try {
      await admin.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [slot]);
      return;
    } catch (error) {
      // 55006 object_in_use: the terminated walsender has not exited yet.
      if ((error as { code?: string }).code !== '55006' || attempt >= 50 || signal?.aborted) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * The server's max_slot_wal_keep_size in MB: the most WAL its slots may keep (-1: no bound;
 * also on a server older than 13, which has none). The one reader of it.
 */
export async function slotWalKeepMb(db: pg.ClientBase | pg.Pool): Promise<number> {
  const { rows } = await db.query<{ mb: string }>("SELECT setting AS mb FROM pg_settings WHERE name = 'max_slot_wal_keep_size'");
  return rows[0] ? Number(rows[0].mb) : -1;
}

/** Why a slot can no longer serve its decoder. */
export interface SlotLoss {
  /** `missing`: no such slot (dropped by hand, or not on a promoted standby); `invalidated`: it is there but unusable. */
  reason: 'missing' | 'invalidated';
  detail: string;
}

/**
 * Whether the slot is gone or invalidated, as pg_replication_slots says. Its row is read
 * whole (to_jsonb), since the columns that say so differ by version: wal_status `lost`
 * (13+), `invalidation_reason` (17+: wal_removed, rows_removed, wal_level_insufficient, …).
 */
export async function slotLoss(db: pg.ClientBase | pg.Pool, slot: string): Promise<SlotLoss | undefined> {
  const { rows } = await db.query<{ s: Record<string, unknown> }>('SELECT to_jsonb(s) AS s FROM pg_replication_slots s WHERE slot_name = $1', [slot]);
  const row = rows[0]?.s;
  if (!row) return { reason: 'missing', detail: `the replication slot ${slot} does not exist (dropped, or not on this server after a failover)` };
  const invalidation = typeof row.invalidation_reason === 'string' ? row.invalidation_reason : undefined;
  if (row.wal_status === 'lost' || invalidation) {
    const why = invalidation === undefined || invalidation === 'wal_removed' ? 'PostgreSQL removed WAL it still needed (max_slot_wal_keep_size)' : invalidation;
    return { reason: 'invalidated', detail: `the replication slot ${slot} was invalidated: ${why}` };
  }
  return undefined;
}
