import pg from 'pg';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { ident } from '../db/sql.ts';

/** Column text as the decoder's replication session prints it (the decoder converts it as it does a change's). */
const TEXT_FORMAT = "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, MDY'; SET LOCAL IntervalStyle = 'postgres'; SET LOCAL extra_float_digits = 1";
/**
 * A chunk waits at most this long for the writers under way (or a swap) to finish, then is
 * read again later: the writers queued behind its lock request wait no longer than that.
 */
const LOCK_TIMEOUT = "SET LOCAL lock_timeout = '200ms'";

export interface ChunkRequest {
  backfillId: string;
  /** The reads are for this webhook destination alone. */
  destinationId: string | null;
  schema: string;
  table: string;
  /** The record-id column: chunks go in its order. */
  key: string;
  /** The last record id of the previous chunk; null: from the start. */
  after: string | null;
  limit: number;
}

export interface ChunkResult {
  rows: number;
  /** The last record id read (null when no row was). */
  lastKey: string | null;
  /** The WAL position of the chunk's message: logged once the sync's log reaches it. */
  lsn: string | null;
}

/**
 * Reads the next `limit` rows of a table and writes them into the WAL as one logical message,
 * in one transaction of the sync database that holds the table IN SHARE MODE. The lock waits
 * for the writers under way, and later ones wait for the commit: the chunk's snapshot is the
 * table at one point in commit order, which is the event log's. So its `read` events sit after
 * every change they include and before every change they do not, and folding the stream never
 * lets a read overtake a newer change of its record (DBLog's watermark window, shrunk to the
 * one transaction that both reads and emits). One lock per chunk, not one per row.
 */
export async function emitChunk(pool: pg.Pool, request: ChunkRequest): Promise<ChunkResult> {
  const client = await pool.connect();
  let ok = false;
  try {
    const table = `${ident(request.schema)}.${ident(request.table)}`;
    // The table lock first, then its columns: a swap that replaced the table meanwhile is
    // either wholly before (its new columns are read) or waits for this chunk.
    const results = (await client.query(
      `BEGIN; ${TEXT_FORMAT}; ${LOCK_TIMEOUT}; LOCK TABLE ${table} IN SHARE MODE;
       SELECT attname AS name, atttypid::int AS oid FROM pg_attribute
        WHERE attrelid = ${pg.escapeLiteral(table)}::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    )) as unknown as pg.QueryResult[];
    const columns = results[results.length - 1]!.rows as Array<{ name: string; oid: number }>;
    if (!columns.some((c) => c.name === request.key)) throw new Error(`table ${request.table} has no column ${request.key}`);
    const values = `ARRAY[${columns.map((c) => `${ident(c.name)}::text`).join(', ')}]`;
    const head = JSON.stringify({
      backfill: request.backfillId,
      destination: request.destinationId,
      schema: request.schema,
      table: request.table,
      columns: columns.map((c) => [c.name, c.oid]),
    });
    const key = ident(request.key);
    // `rows` joins the head's fields; HAVING: no message for an empty chunk.
    const { rows } = await client.query<{ lsn: string; rows: number; last_key: string }>(
      `SELECT pg_logical_emit_message(true, $1, left($2, -1) || ',"rows":' || json_agg(c.v ORDER BY c.k)::text || '}')::text AS lsn,
              count(*)::int AS rows, max(c.k)::text AS last_key
         FROM (SELECT ${values} AS v, ${key} AS k FROM ${table}
                ${request.after === null ? '' : `WHERE ${key} > $4`} ORDER BY ${key} LIMIT $3) c
       HAVING count(*) > 0`,
      // A range on the key (no "or from the start" in the same statement): the primary key's index serves each chunk.
      [MESSAGE_PREFIX.read, head, request.limit, ...(request.after === null ? [] : [request.after])],
    );
    await client.query('COMMIT');
    ok = true;
    const row = rows[0];
    return row ? { rows: row.rows, lastKey: row.last_key, lsn: row.lsn } : { rows: 0, lastKey: null, lsn: null };
  } finally {
    if (!ok) await client.query('ROLLBACK').catch(() => undefined);
    client.release(!ok);
  }
}
