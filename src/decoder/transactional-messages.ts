import { MESSAGE_PREFIX } from '../db/messages.ts';
import type { OpenTransaction } from './decoder-options.ts';
import { rowEvent, tableInfo, type TableInfo } from './events.ts';
import type { DecoderMembers, Member } from './members.ts';
import type { RawValue } from './pgoutput.ts';
import type { GapMessage } from './slot-recovery.ts';

/** What the decoder lends the handling of a transaction's logical messages. */
export interface MessageContext {
  txn: OpenTransaction;
  members: DecoderMembers;
  /** The next event key and time of the transaction (its position moves on). */
  meta: (txn: OpenTransaction, member: Member) => { eventKey: string; createdAt: Date; createdAtText: string };
  /** Table infos of backfill chunks by sync, table and columns: a backfill sends the same ones chunk after chunk. */
  readInfos: Map<string, TableInfo | undefined>;
}

/**
 * A backfill's chunk (src/backfill/chunk.ts): rows read under a table share lock in the
 * transaction that emitted them, so they sit in commit order exactly where they were current.
 */
export interface ReadChunk {
  /** The backfill's id (for the log), and its webhook destination when the reads are for it alone. */
  backfill: string;
  destination: string | null;
  schema: string;
  table: string;
  /** [name, type oid] of each column, in the order of each row's values. */
  columns: Array<[string, number]>;
  /** Each row's column text, as the replication session prints it. */
  rows: RawValue[][];
}

/**
 * A transactional message of the sync databases' own: a swap's row differences (as if they
 * were row changes of its sync's table), or a backfill's reads. Answers a promise when the
 * members must be asked again first (a table of a schema other than the first's).
 */
export function transactionalMessage(ctx: MessageContext, prefix: string, content: string): Promise<void> | undefined {
  switch (prefix) {
    case MESSAGE_PREFIX.swapColumns:
      return swapColumns(ctx, content);
    case MESSAGE_PREFIX.swapRow:
      swapRow(ctx, content);
      return undefined;
    case MESSAGE_PREFIX.read:
      return reads(ctx, content);
    case MESSAGE_PREFIX.gap:
      return gapMarkers(ctx, content);
    default:
      return undefined;
  }
}

/** Runs `then` once the schema's member is known: at once for the first's, else after a refresh. */
function withMember(ctx: MessageContext, schema: string, then: (member: Member | undefined) => void): Promise<void> | undefined {
  if (schema !== 'public') return ctx.members.refresh().then(() => then(ctx.members.of(schema)));
  then(ctx.members.of(schema));
  return undefined;
}

const relation = (schema: string, table: string, columns: Array<[string, number]>) => ({
  schema,
  name: table,
  columns: columns.map(([name, typeOid]) => ({ name, typeOid })),
});

function swapColumns(ctx: MessageContext, content: string): Promise<void> | undefined {
  const { txn } = ctx;
  const body = JSON.parse(content) as { schema?: string; table: string; prior: Array<[string, number]>; next: Array<[string, number]> };
  const schema = body.schema ?? 'public';
  return withMember(ctx, schema, (member) => {
    const next = member && tableInfo(relation(schema, body.table, body.next), member.rules, schema);
    const prior = member && tableInfo(relation(schema, body.table, body.prior.length > 0 ? body.prior : body.next), member.rules, schema);
    txn.swap = member && next && prior ? { next, prior, member } : undefined;
  });
}

function swapRow(ctx: MessageContext, content: string): void {
  const { txn } = ctx;
  if (!txn.swap) {
    txn.position++;
    return;
  }
  const { member } = txn.swap;
  const meta = ctx.meta(txn, member);
  if (txn.commit <= member.loggedCommit) return;
  const [kind, prior, next] = JSON.parse(content) as ['inserted' | 'updated' | 'deleted', RawValue[] | null, RawValue[] | null];
  const event = rowEvent(kind, txn.swap.next, prior ?? undefined, next ?? undefined, meta, txn.swap.prior);
  if (event) txn.events.push([member, event]);
}

function reads(ctx: MessageContext, content: string): Promise<void> | undefined {
  const { txn } = ctx;
  const chunk = JSON.parse(content) as ReadChunk;
  return withMember(ctx, chunk.schema, (member) => {
    if (!member) {
      txn.position += chunk.rows.length;
      return;
    }
    const shape = `${member.syncId}:${chunk.schema}.${chunk.table}:${JSON.stringify(chunk.columns)}`;
    if (!ctx.readInfos.has(shape)) {
      // Kept small: a schema change makes new shapes, and the old ones are no use.
      if (ctx.readInfos.size >= 64) ctx.readInfos.clear();
      ctx.readInfos.set(shape, tableInfo(relation(chunk.schema, chunk.table, chunk.columns), member.rules, member.schema));
    }
    const info = ctx.readInfos.get(shape);
    for (const row of chunk.rows) {
      const meta = ctx.meta(txn, member);
      // Already in this sync's log (a replay after a crash), or not a table of events.
      if (txn.commit <= member.loggedCommit || !info) continue;
      const event = rowEvent('read', info, undefined, row, meta);
      if (!event) continue;
      if (chunk.destination !== null) event.destinationId = chunk.destination;
      txn.events.push([member, event]);
    }
  });
}

/**
 * A lost slot's gap (slot-recovery.ts): a marker event on each of the sync's collections, in
 * every partition of its topic (append.ts), before the re-read that follows it (docs/events.md#gaps-a-lost-replication-slot).
 */
function gapMarkers(ctx: MessageContext, content: string): Promise<void> | undefined {
  const { txn } = ctx;
  const gap = JSON.parse(content) as GapMessage;
  return withMember(ctx, gap.schema, (member) => {
    for (const [table, collection] of gap.tables) {
      if (!member || member.syncId !== gap.sync) {
        txn.position++;
        continue;
      }
      const meta = ctx.meta(txn, member);
      if (txn.commit <= member.loggedCommit) continue;
      const data = {
        backfill: gap.backfill,
        commit_lsn: txn.commitLsn,
        detail: gap.detail,
        gap: gap.gap,
        lost_at: gap.lost_at,
        reason: gap.reason,
        resumed_lsn: gap.resumed_lsn,
      };
      const value = JSON.stringify({ collection, created_at: meta.createdAtText, data, event: 'gap', id: gap.gap, table_db_name: table });
      txn.events.push([member, { collection, recordId: gap.gap, eventKey: meta.eventKey, createdAt: meta.createdAt, value, everyPartition: true }]);
    }
  });
}
