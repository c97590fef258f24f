import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { inTransaction } from '../db/sql.ts';
import { escapeText } from '../writer/copy.ts';
import { EVENTS_CHANNEL } from './bus.ts';
import { ensureEventPartitions, topicName, type LoggedEvent } from './log.ts';

/** An event made by the decoder, before the log gives it a seq and an offset. */
export interface NewEvent {
  collection: string;
  recordId: string;
  eventKey: string;
  createdAt: Date;
  /** The event JSON, as delivered: compact, with no raw tab, newline or carriage return (as JSON.stringify makes it). */
  value: string;
  /** `value` has no backslash, so COPY and SQL literals take it as it is; unset: checked when logged. */
  plain?: boolean;
  /** A backfill's read for this webhook destination alone: on no partition, so no other reader takes it. */
  destinationId?: string;
  /**
   * A marker every reader of the topic must meet (a gap): logged once in each partition, the
   * partition appended to its key, so that each ordered part of the stream carries it.
   */
  everyPartition?: boolean;
  /** Set for each copy of an everyPartition marker: its partition. */
  partition?: number;
}

export interface AppenderOptions {
  pool: pg.Pool;
  syncId: string;
  accountId: string;
  /** Partitions of each new topic; a record always lands in the same one. */
  partitions?: number;
}

const literal = (text: string) => pg.escapeLiteral(text);

const isPlain = (e: NewEvent) => e.plain ?? e.value.indexOf('\\') < 0;

/** pg.escapeLiteral's result, by native string search rather than a loop per character (event values). */
function valueLiteral(e: NewEvent): string {
  const quoted = e.value.indexOf("'") < 0 ? e.value : e.value.replaceAll("'", "''");
  return isPlain(e) ? `'${quoted}'` : ` E'${quoted.replaceAll('\\', '\\\\')}'`;
}

const EVENT_COLUMNS = 'sync_id, seq, topic, partition, "offset", record_id, event_key, created_at, destination_id, value';

/** The partition of events meant for one webhook destination: no topic reader asks for it. */
export const DESTINATION_PARTITION = -1;

/**
 * Batches up to this many events (and bytes of event JSON) are written with one multi-row
 * INSERT in the same query as the rest, so a trickle of changes costs one round trip per
 * batch; larger ones go by COPY, whose per-row cost is lower but which takes four round trips.
 */
const ONE_TRIP_MAX = 100;
const ONE_TRIP_MAX_CHARS = 256 * 1024;

/**
 * COPY text escaping for JSON: JSON text never holds a raw tab, newline or carriage return,
 * so only backslashes need doubling (and most events have none).
 */
function escapeJson(e: NewEvent): string {
  return isPlain(e) ? e.value : e.value.replaceAll('\\', '\\\\');
}

/** Chunks of the COPY data, about 1 MB each. */
const COPY_CHUNK = 1 << 20;

/**
 * COPY rows written straight into buffers as they are made: no string per row and no
 * joined megabyte string to encode again (the decoder's hot path).
 */
class CopyRows {
  readonly chunks: Buffer[] = [];
  private chunk = Buffer.allocUnsafe(COPY_CHUNK);
  private used = 0;

  /** One row: `head` (the columns before the last, each followed by a tab), then `last` and a newline. */
  row(head: string, last: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    const most = (head.length + last.length) * 3 + 1;
    if (this.used + most > this.chunk.length) {
      this.done();
      this.chunk = Buffer.allocUnsafe(Math.max(COPY_CHUNK, most));
    }
    this.used += this.chunk.write(head, this.used);
    this.used += this.chunk.write(last, this.used);
    this.chunk[this.used++] = 0x0a;
  }

  /** The chunks, the last one included. */
  done(): Buffer[] {
    if (this.used > 0) this.chunks.push(this.chunk.subarray(0, this.used));
    this.chunk = Buffer.alloc(0);
    this.used = 0;
    return this.chunks;
  }
}

/** Which partition a record's events go to: stable, so per-record order holds within it. */
export function partitionOf(recordId: string, partitions: number): number {
  if (partitions <= 1) return 0;
  return createHash('sha1').update(recordId).digest().readUInt32BE(0) % partitions;
}

const DAY_MS = 86_400_000;

/**
 * The one writer of a sync's events (the decoder holding the sync's slot): gives out seq
 * and offsets, and logs a batch together with the WAL position it covers in one
 * transaction, so that "logged" and "acknowledgeable" can never disagree.
 */
export class EventAppender {
  private seq = 0n;
  private lsn = '0/0';
  private readonly topics = new Map<string, { partitions: number; next: bigint[] }>();
  private readonly readyDays = new Set<number>();
  private preparing: Promise<void> = Promise.resolve();

  constructor(private readonly options: AppenderOptions) {}

  /** Where the log stands for this sync: the commit LSN of the last fully logged transaction. */
  async load(): Promise<{ lsn: string; seq: string }> {
    const { rows } = await this.options.pool.query<{ lsn: string; seq: string }>(
      'SELECT lsn::text AS lsn, seq::text AS seq FROM decoder_progress WHERE sync_id = $1',
      [this.options.syncId],
    );
    this.lsn = rows[0]?.lsn ?? '0/0';
    this.seq = BigInt(rows[0]?.seq ?? '0');
    this.topics.clear();
    return { lsn: this.lsn, seq: this.seq.toString() };
  }

  get loggedLsn(): string {
    return this.lsn;
  }

  /**
   * Logs `events` (in order) and records `lsn` as fully logged, in one transaction, then
   * NOTIFYs readers. An empty batch only moves the position (transactions with no events).
   * Returns the events as the log now holds them, for readers in this process (EventBus.publishLogged).
   *
   * `after` is the append before this one: a large batch's COPY may overlap it, but this one
   * commits only once that one has committed, and not at all if it failed. So the log is
   * never seen with a gap, and a failed batch takes every later one down with it (the
   * decoder then resumes from the slot, which was told of none of them).
   */
  async append(events: NewEvent[], lsn: string, after?: Promise<unknown>): Promise<LoggedEvent[]> {
    // Appends prepare one at a time, in call order: that is what keeps seqs and offsets in order.
    const turn = this.preparing.then(() => this.prepare(events));
    this.preparing = turn.then(
      () => undefined,
      () => undefined,
    );
    let prepared;
    try {
      prepared = await turn;
    } catch (error) {
      // As below: settle after the append before this one, so the owner's reload sees its end.
      this.topics.clear();
      await after?.catch(() => undefined);
      throw error;
    }
    const { tuples, copy, logged, next, seq } = prepared;
    const { pool, syncId } = this.options;
    // After the events, in the same transaction: literals, escaped.
    const closing = next.map(
      ([topic, offsets]) =>
        `UPDATE event_partitions p SET next_offset = n.next
           FROM unnest(${literal(`{${offsets.join(',')}}`)}::bigint[]) WITH ORDINALITY AS n(next, i)
          WHERE p.topic = ${literal(topic)} AND p.partition = n.i - 1 AND p.next_offset < n.next`,
    );
    if (logged.length > 0) closing.push(`SELECT pg_notify(${literal(EVENTS_CHANNEL)}, ${literal(syncId)})`);
    closing.push(
      `INSERT INTO decoder_progress (sync_id, lsn, seq, updated_at) VALUES (${literal(syncId)}, ${literal(lsn)}, ${literal(seq)}, now())
       ON CONFLICT (sync_id) DO UPDATE SET lsn = excluded.lsn, seq = excluded.seq, updated_at = now()`,
    );
    try {
      if (!copy) {
        // Ordering: sent only once the batch before this one committed.
        await after;
        // One round trip: the statements of one simple query run as one implicit transaction.
        const insert = `INSERT INTO events (${EVENT_COLUMNS}) VALUES ${tuples.join(',\n')}`;
        await pool.query((logged.length > 0 ? [insert, ...closing] : closing).join(';\n'));
      } else {
        await inTransaction(pool, async (client) => {
          // COPY, in text format: several times the rate of a multi-row INSERT at these sizes.
          const stream = client.query(copyFrom(`COPY events (${EVENT_COLUMNS}) FROM STDIN`));
          await pipeline(Readable.from(copy), stream);
          // Ordering: commit after the batch before this one committed.
          await after;
          // The rest in one round trip (the commit follows in inTransaction).
          await client.query(closing.join(';\n'));
        });
      }
    } catch (error) {
      // What was handed out in memory no longer matches the log: the owner must load() again.
      this.topics.clear();
      // Settle only after the append before this one has, so that the owner, waiting for its
      // last append, knows none is still writing when it reloads the log's position.
      await after?.catch(() => undefined);
      throw error;
    }
    this.lsn = lsn;
    return logged;
  }

  /** Seqs and offsets for a batch, and its rows (VALUES tuples, or COPY data). */
  private async prepare(batch: NewEvent[]) {
    const { pool, syncId } = this.options;
    const events = batch.some((e) => e.everyPartition) ? await this.copied(batch) : batch;
    for (const e of events) {
      const day = Math.floor(e.createdAt.getTime() / DAY_MS);
      if (!this.readyDays.has(day)) {
        await ensureEventPartitions(pool, e.createdAt);
        this.readyDays.add(day);
      }
    }
    const touched = new Map<string, bigint[]>();
    const tuples: string[] = [];
    const logged: LoggedEvent[] = [];
    // Rows as the write will take them: VALUES tuples for one round trip, or COPY lines.
    let chars = 0;
    for (const e of events) chars += e.value.length;
    const rows = events.length <= ONE_TRIP_MAX && chars <= ONE_TRIP_MAX_CHARS ? undefined : new CopyRows();
    const sid = escapeText(syncId);
    const sidLiteral = literal(syncId);
    const created = new Map<Date, string>();
    for (const e of events) {
      const topic = topicName(syncId, e.collection);
      let partition = DESTINATION_PARTITION;
      let offset = 0n;
      if (e.destinationId === undefined) {
        const state = this.topics.get(topic) ?? (await this.loadTopic(topic, e.collection));
        touched.set(topic, state.next);
        partition = e.partition ?? partitionOf(e.recordId, state.partitions);
        offset = state.next[partition]!;
        state.next[partition] = offset + 1n;
      }
      this.seq += 1n;
      let at = created.get(e.createdAt);
      if (at === undefined) {
        at = e.createdAt.toISOString();
        created.set(e.createdAt, at);
      }
      const seq = this.seq.toString();
      const offsetText = offset.toString();
      if (rows) {
        rows.row(
          `${sid}\t${seq}\t${escapeText(topic)}\t${partition}\t${offsetText}\t${escapeText(e.recordId)}\t${escapeText(e.eventKey)}\t${at}\t${e.destinationId === undefined ? '\\N' : escapeText(e.destinationId)}\t`,
          escapeJson(e),
        );
      } else {
        const destination = e.destinationId === undefined ? 'NULL' : literal(e.destinationId);
        tuples.push(
          `(${sidLiteral}, ${seq}, ${literal(topic)}, ${partition}, ${offsetText}, ${literal(e.recordId)}, ${literal(e.eventKey)}, '${at}', ${destination}, ${valueLiteral(e)})`,
        );
      }
      const event: LoggedEvent = {
        syncId,
        seq,
        topic,
        partition,
        offset: offsetText,
        recordId: e.recordId,
        eventKey: e.eventKey,
        createdAt: e.createdAt,
        value: e.value,
      };
      if (e.destinationId !== undefined) event.destinationId = e.destinationId;
      logged.push(event);
    }
    const seq = this.seq.toString();
    const next = [...touched].map(([topic, offsets]) => [topic, offsets.map(String)] as const);
    return { tuples, copy: rows?.done(), logged, next, seq };
  }

  /** The batch with each everyPartition marker as one copy per partition of its topic. */
  private async copied(events: NewEvent[]): Promise<NewEvent[]> {
    const out: NewEvent[] = [];
    for (const e of events) {
      if (!e.everyPartition) {
        out.push(e);
        continue;
      }
      const topic = topicName(this.options.syncId, e.collection);
      const { partitions } = this.topics.get(topic) ?? (await this.loadTopic(topic, e.collection));
      for (let p = 0; p < partitions; p++) out.push({ ...e, everyPartition: false, partition: p, eventKey: `${e.eventKey}.${p}` });
    }
    return out;
  }

  /** A topic's partitions and next offsets from the log, creating the topic on first use. */
  private async loadTopic(topic: string, collection: string): Promise<{ partitions: number; next: bigint[] }> {
    const { pool } = this.options;
    // Committed on its own: a topic row with no event yet is harmless, and ON CONFLICT makes it idempotent.
    await pool.query(
      `INSERT INTO event_topics (topic, sync_id, account_id, collection, partitions) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (topic) DO NOTHING`,
      [topic, this.options.syncId, this.options.accountId, collection, this.options.partitions ?? 1],
    );
    const { rows: topicRows } = await pool.query<{ partitions: number }>('SELECT partitions FROM event_topics WHERE topic = $1', [topic]);
    const partitions = topicRows[0]!.partitions;
    await pool.query('INSERT INTO event_partitions (topic, partition) SELECT $1, generate_series(0, $2 - 1) ON CONFLICT DO NOTHING', [topic, partitions]);
    const { rows } = await pool.query<{ next_offset: string }>('SELECT next_offset FROM event_partitions WHERE topic = $1 ORDER BY partition', [topic]);
    const state = { partitions, next: rows.map((r) => BigInt(r.next_offset)) };
    this.topics.set(topic, state);
    return state;
  }
}
