import type pg from 'pg';
import { BackfillStore } from '../backfill/store.ts';
import { collectionTables } from '../backfill/tables.ts';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { createSlot, dropSlot, failoverCommand, type SlotLoss, slotLoss } from '../db/slots.ts';
import { withClient } from '../db/sql.ts';
import { isTransientDbError } from '../db/transient.ts';
import { toError } from '../errors.ts';
import { newBackfillId, randomLowerAlnum } from '../ids.ts';
import type { Logger } from '../log.ts';
import { schemasOf } from '../syncdb/schemas.ts';
import type { Member } from './members.ts';
import { formatLsn } from './pgoutput.ts';

export interface SlotRecoveryOptions {
  /** The sync whose decoder reads the slot (the database's first). */
  syncId: string;
  slot: string;
  /** Admin URL of the sync database. */
  databaseUrl: string;
  control: pg.Pool;
  logger: Logger;
}

/** What the decoder turns into gap markers (transactional-messages.ts), one per collection. */
export interface GapMessage {
  gap: string;
  sync: string;
  schema: string;
  backfill: string;
  reason: SlotLoss['reason'];
  detail: string;
  lost_at: string;
  /** Where the new slot starts: every change from here on is in the stream, the gap is before it. */
  resumed_lsn: string;
  /** [table, collection] of each collection the re-read covers. */
  tables: Array<[string, string]>;
}

interface PendingGap {
  id: string;
  sync_id: string;
  backfill_id: string;
  reason: SlotLoss['reason'];
  detail: string;
  lost_at: Date;
  resumed_lsn: string;
}

/**
 * A slot that is gone or invalidated streams nothing ever again; left alone, the decoder
 * retried it for good while the status said all was well. Here it is replaced: the loss is
 * recorded for every sync of the database (slot_gaps), a new slot is made, and then, sync by
 * sync, a gap marker goes into the WAL and a backfill of every collection starts after it.
 * Marker and reads come through the new slot in commit order, so a consumer meets the marker
 * before the reads that replace what it held (docs/events.md#gaps-a-lost-replication-slot). The changes between what
 * the log held and the new slot's start are what is missing; the reads make the stream whole.
 */
export class SlotRecovery {
  private readonly backfills: BackfillStore;
  /** The slot was found a failover slot, or made one (see failoverSetup). */
  private failoverKnown = false;

  constructor(private readonly options: SlotRecoveryOptions) {
    this.backfills = new BackfillStore(options.control);
  }

  /**
   * After a session failed: when the slot is lost, replaces it and records the gap (its
   * markers follow with markPending, at the next session's start). True when it did. Not
   * for a sync being deleted (its slot goes on purpose), nor before its members are known.
   */
  async afterFailure(members: Member[], active: () => Promise<boolean>): Promise<boolean> {
    if (members.length === 0) return false;
    try {
      if (!(await active())) return false;
      return await this.replaceLost(members);
    } catch (error) {
      // A server away (the usual cause of the failed session) is said by the session's own failure.
      const level = isTransientDbError(error) ? 'debug' : 'warn';
      this.options.logger[level]({ err: toError(error) }, 'could not check or replace the replication slot; trying again');
      return false;
    }
  }

  private async replaceLost(members: Member[]): Promise<boolean> {
    const { databaseUrl, slot, control, syncId, logger } = this.options;
    return withClient(databaseUrl, async (db) => {
      const loss = await slotLoss(db, slot);
      if (!loss) return false;
      const { rows: pending } = await control.query('SELECT 1 FROM slot_gaps WHERE decoder_sync_id = $1 AND marked_at IS NULL', [syncId]);
      // A loss noticed again before its markers were made (a crash between): the same gap.
      if (pending.length === 0) {
        for (const member of members) {
          await control.query(
            `INSERT INTO slot_gaps (id, sync_id, decoder_sync_id, slot, reason, detail, logged_lsn, backfill_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
            [`gap_${randomLowerAlnum(16)}`, member.syncId, syncId, slot, loss.reason, loss.detail, lsnText(member.loggedCommit), newBackfillId()],
          );
        }
      }
      await dropSlot(db, slot);
      const resumed = await createSlot(db, slot);
      await control.query('UPDATE slot_gaps SET recovered_at = now(), resumed_lsn = $2 WHERE decoder_sync_id = $1 AND marked_at IS NULL', [syncId, resumed]);
      logger.warn(
        { slot, reason: loss.reason, detail: loss.detail, resumedLsn: resumed, loggedLsn: lsnText(members[0]!.loggedCommit) },
        'replication slot lost: made a new one; changes since the event log last stood are missing, so the stream gets a gap marker and every table is read again',
      );
      return true;
    });
  }

  /**
   * Once per decoder: the command that makes its slot a failover slot, when it is not one yet
   * and the server has them (17+). A failed look is tried again at the next session.
   */
  async failoverSetup(): Promise<string | undefined> {
    if (this.failoverKnown) return undefined;
    try {
      const command = await withClient(this.options.databaseUrl, (db) => failoverCommand(db, this.options.slot));
      this.failoverKnown = true;
      if (command) this.options.logger.info({ slot: this.options.slot }, 'making the replication slot a failover slot, for a standby to keep');
      return command;
    } catch (error) {
      this.options.logger.debug({ err: toError(error) }, 'could not read whether the slot is a failover slot');
      return undefined;
    }
  }

  /** Markers and re-reads of gaps recorded but not yet marked: made now, sync by sync (each once). */
  async markPending(members: Member[]): Promise<void> {
    const { rows } = await this.options.control.query<PendingGap>(
      `SELECT id, sync_id, backfill_id, reason, detail, lost_at, resumed_lsn::text AS resumed_lsn FROM slot_gaps
        WHERE decoder_sync_id = $1 AND marked_at IS NULL AND recovered_at IS NOT NULL ORDER BY lost_at, id`,
      [this.options.syncId],
    );
    for (const gap of rows) {
      const member = members.find((m) => m.syncId === gap.sync_id);
      // Its backfill exists: the marker went before it (a crash after both, before marked_at).
      if (member && !(await this.backfills.exists(gap.backfill_id))) await this.mark(gap, member);
      await this.options.control.query('UPDATE slot_gaps SET marked_at = now() WHERE id = $1', [gap.id]);
      this.options.logger.info({ member: gap.sync_id, gap: gap.id, backfill: gap.backfill_id }, 'gap marked in the stream; every table is being read again');
    }
  }

  private async mark(gap: PendingGap, member: Member): Promise<void> {
    const schema = schemasOf(member.schema).live;
    const tables = await withClient(this.options.databaseUrl, async (db) => {
      const found = [...(await collectionTables(db, schema, member.rules)).values()];
      const message: GapMessage = {
        gap: gap.id,
        sync: member.syncId,
        schema,
        backfill: gap.backfill_id,
        reason: gap.reason,
        detail: gap.detail,
        lost_at: gap.lost_at.toISOString(),
        resumed_lsn: gap.resumed_lsn,
        tables: found.map((t) => [t.table, t.collection]),
      };
      // Committed before the backfill exists, so every read of it comes after the marker.
      await db.query('SELECT pg_logical_emit_message(true, $1, $2)', [MESSAGE_PREFIX.gap, JSON.stringify(message)]);
      return found;
    });
    await this.backfills.createForGap({
      id: gap.backfill_id,
      syncId: member.syncId,
      accountId: member.accountId,
      collections: tables.map((t) => t.collection),
    });
  }
}

const lsnText = (lsn: bigint) => formatLsn(Number(lsn >> 32n), Number(lsn & 0xffffffffn));
