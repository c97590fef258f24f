import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { inTransaction } from '../db/sql.ts';
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
  /** `value` has no backslash, so a SQL literal takes it as it is (binary COPY needs no escaping); unset: checked when logged. */
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

/** Chunks of the COPY data, about 1 MB each. */
const COPY_CHUNK = 1 << 20;
/** The binary COPY header: signature, flags, no extension. */
const BINARY_HEADER = Buffer.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
/** Milliseconds from the Unix epoch to PostgreSQL's (2000-01-01), whose microseconds timestamptz counts. */
const PG_EPOCH_MS = 946_684_800_000;
const EVENT_FIELDS = 10;

/**
 * COPY rows in the binary format, written straight into buffers as they are made (the
 * decoder's hot path). Against the text format: nothing to escape here, and nothing for the
 * server to parse (a timestamptz's text, a bigint's digits): the control server's CPU per
 * event fell by about a fifth. Texts go as their UTF-8 bytes, numbers big-endian,
 * timestamptz as microseconds since 2000.
 */
class BinaryRows {
  readonly chunks: Buffer[] = [];
  private chunk = Buffer.allocUnsafe(COPY_CHUNK);
  private used = 0;
  private readonly texts = new Map<string, Buffer>();

  constructor() {
    this.used = BINARY_HEADER.copy(this.chunk, 0);
  }

  /** One event row; the texts every row repeats (sync id, topic) are encoded once a batch. */
  row(syncId: string, seq: number, topic: string, partition: number, offset: number, e: NewEvent): void {
    const sid = this.encoded(syncId);
    const top = this.encoded(topic);
    // UTF-8 takes at most 3 bytes per UTF-16 unit; each field has a 4-byte length.
    const most =
      2 +
      EVENT_FIELDS * 4 +
      sid.length +
      top.length +
      8 +
      4 +
      8 +
      8 +
      (e.recordId.length + e.eventKey.length + e.value.length + (e.destinationId?.length ?? 0)) * 3;
    if (this.used + most > this.chunk.length) {
      this.done(false);
      this.chunk = Buffer.allocUnsafe(Math.max(COPY_CHUNK, most));
    }
    const b = this.chunk;
    let at = b.writeInt16BE(EVENT_FIELDS, this.used);
    at = this.bytes(b, at, sid);
    at = int64(b, at, seq);
    at = this.bytes(b, at, top);
    at = b.writeInt32BE(4, at);
    at = b.writeInt32BE(partition, at);
    at = int64(b, at, offset);
    at = this.text(b, at, e.recordId);
    at = this.text(b, at, e.eventKey);
    // Whole milliseconds: exact in a double as microseconds (below 2^53 until the year 2255).
    at = int64(b, at, (e.createdAt.getTime() - PG_EPOCH_MS) * 1000);
    at = e.destinationId === undefined ? b.writeInt32BE(-1, at) : this.text(b, at, e.destinationId);
    this.used = this.text(b, at, e.value);
  }

  /** The chunks, the trailer after the last row included. */
  done(last = true): Buffer[] {
    if (last) this.used = this.chunk.writeInt16BE(-1, this.used);
    if (this.used > 0) this.chunks.push(this.chunk.subarray(0, this.used));
    this.chunk = Buffer.alloc(0);
    this.used = 0;
    return this.chunks;
  }

  private encoded(text: string): Buffer {
    let bytes = this.texts.get(text);
    if (!bytes) this.texts.set(text, (bytes = Buffer.from(text)));
    return bytes;
  }

  private bytes(b: Buffer, at: number, bytes: Buffer): number {
    const next = b.writeInt32BE(bytes.length, at);
    return next + bytes.copy(b, next);
  }

  private text(b: Buffer, at: number, text: string): number {
    const written = b.write(text, at + 4);
    b.writeInt32BE(written, at);
    return at + 4 + written;
  }
}

/** An int8 field of a binary COPY row: its length, then the value (a safe integer) big-endian. */
function int64(b: Buffer, at: number, value: number): number {
  const high = Math.floor(value / 0x1_0000_0000);
  at = b.writeInt32BE(8, at);
  at = b.writeInt32BE(high, at);
  return b.writeUInt32BE(value - high * 0x1_0000_0000, at);
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
  /** The last seq given out, and each topic's next offsets: numbers, exact far past any log's size (2^53). */
  private seq = 0;
  private lsn = '0/0';
  private readonly topics = new Map<string, { partitions: number; next: number[] }>();
  /** Each collection's topic name, made once (a string built per event cost a hash per lookup). */
  private readonly topicNames = new Map<string, string>();
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
    this.seq = Number(rows[0]?.seq ?? '0');
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
          // COPY, in binary format: several times the rate of a multi-row INSERT at these sizes.
          const stream = client.query(copyFrom(`COPY events (${EVENT_COLUMNS}) FROM STDIN (FORMAT binary)`));
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
    const touched = new Map<string, number[]>();
    const tuples: string[] = [];
    const logged: LoggedEvent[] = [];
    // Rows as the write will take them: VALUES tuples for one round trip, or COPY lines.
    let chars = 0;
    for (const e of events) chars += e.value.length;
    const rows = events.length <= ONE_TRIP_MAX && chars <= ONE_TRIP_MAX_CHARS ? undefined : new BinaryRows();
    const sidLiteral = literal(syncId);
    const created = new Map<Date, string>();
    for (const e of events) {
      let topic = this.topicNames.get(e.collection);
      if (topic === undefined) this.topicNames.set(e.collection, (topic = topicName(syncId, e.collection)));
      let partition = DESTINATION_PARTITION;
      let offset = 0;
      if (e.destinationId === undefined) {
        const state = this.topics.get(topic) ?? (await this.loadTopic(topic, e.collection));
        touched.set(topic, state.next);
        partition = e.partition ?? partitionOf(e.recordId, state.partitions);
        offset = state.next[partition]!;
        state.next[partition] = offset + 1;
      }
      this.seq += 1;
      let at = created.get(e.createdAt);
      if (at === undefined) {
        at = e.createdAt.toISOString();
        created.set(e.createdAt, at);
      }
      const seq = String(this.seq);
      const offsetText = String(offset);
      if (rows) {
        rows.row(syncId, this.seq, topic, partition, offset, e);
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
    const seq = String(this.seq);
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
  private async loadTopic(topic: string, collection: string): Promise<{ partitions: number; next: number[] }> {
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
    const state = { partitions, next: rows.map((r) => Number(r.next_offset)) };
    this.topics.set(topic, state);
    return state;
  }
}
