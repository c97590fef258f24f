import type pg from 'pg';
import { CORE } from '../syncdb/core.ts';
import { migrateSyncDatabase } from '../syncdb/migrate.ts';
import { marksTableOf, type SyncSchemas } from '../syncdb/schemas.ts';

/**
 * Marks of records written by someone other than the sweep (the proxy, on a client's
 * write), kept in `<schema>_swap._recent_writes` out of readers' sight (marksTableOf): a sweep page fetched before such a
 * write and landing after it holds an older copy, and must not put it back.
 *
 * Ordering: a sweep writes each batch holding `SHARE ROW EXCLUSIVE` on the marks table. Every
 * marked write also writes that table, so it takes its lock before its snapshot (at parse or
 * bind): the sweep's lock waits for writes in progress and holds new ones back. So the batch's
 * statement sees every mark of every write that got there first, and every write that comes
 * later is newer.
 */
export { marksTableOf };

/** A marked write: the upstream table (marks are kept per upstream table) and when (ms, the writer's clock). */
export interface Mark {
  table: string;
  at: number;
}

/** Clocks of different processes differ a little: marks this much older than a page still count. */
export const MARK_CLOCK_MARGIN_MS = 2_000;

/** A sweep batch waits at most this long for the marks' lock (then the cycle fails and is retried). */
export const MARKS_LOCK_TIMEOUT_MS = 10_000;

/** How long marks are kept: far longer than a page takes to arrive. */
export const MARK_TTL_MS = 10 * 60_000;

/** Databases (by pool) whose bookkeeping is known to be up to date. */
const ready = new WeakMap<pg.Pool, Map<string, Promise<unknown>>>();

/**
 * Brings the database's own schema up to date (the marks table among it) if it predates it:
 * asked of the database once per pool and schema.
 */
export function ensureMarks(pool: pg.Pool, schemas: SyncSchemas): Promise<unknown> {
  // A pool of a shared database serves several syncs: each schema is asked about once.
  let bySchema = ready.get(pool);
  if (!bySchema) ready.set(pool, (bySchema = new Map()));
  const schemasReady = bySchema;
  let known = schemasReady.get(schemas.live);
  if (!known) {
    known = migrateSyncDatabase(pool, [CORE], schemas);
    known.catch(() => schemasReady.delete(schemas.live)); // asked again next time
    schemasReady.set(schemas.live, known);
  }
  return known;
}

/**
 * The statement (for a CTE) that marks every key the subquery `keys` gives; the table and time
 * are parameters. Keys once each (ON CONFLICT cannot touch a row twice) and in order (two
 * writers lock the marks they share in the same order).
 */
export function markStatement(live: string, keys: string, tableParam: string, atParam: string): string {
  return `INSERT INTO ${marksTableOf(live)} AS mk (tbl, id, at)
      SELECT ${tableParam}::text, m.k, ${atParam}::bigint FROM (SELECT DISTINCT k FROM (${keys}) AS s(k)) AS m ORDER BY m.k
      ON CONFLICT (tbl, id) DO UPDATE SET at = greatest(mk.at, excluded.at)`;
}

/** The marks in live schema `live` of one upstream table made at or after `since` (ms); of the records `ids` only, when given. */
export async function marksSince(
  client: pg.Pool | pg.ClientBase,
  live: string,
  table: string,
  since: number,
  ids?: string[],
): Promise<Array<{ id: string; at: number }>> {
  const { rows } = await client.query<{ id: string; at: string }>(
    `SELECT id, at FROM ${marksTableOf(live)} WHERE tbl = $1 AND at >= $2 AND ($3::text[] IS NULL OR id = ANY($3::text[]))`,
    [table, since, ids ?? null],
  );
  return rows.map((r) => ({ id: r.id, at: Number(r.at) }));
}

/** The condition (for a WHERE) that the row keyed `keyExpr` has no mark at or after the time parameter. */
export function unmarkedSince(live: string, keyExpr: string, tableParam: string, sinceParam: string): string {
  return `NOT EXISTS (SELECT 1 FROM ${marksTableOf(live)} mk WHERE mk.tbl = ${tableParam}::text AND mk.id = ${keyExpr} AND mk.at >= ${sinceParam}::bigint)`;
}

/** Deletes marks older than MARK_TTL_MS; marks a write holds right now are left for next time. */
export async function pruneMarks(client: pg.Pool | pg.ClientBase, schemas: SyncSchemas, now = Date.now()): Promise<void> {
  const marks = marksTableOf(schemas.live);
  await client.query(`DELETE FROM ${marks} WHERE ctid IN (SELECT ctid FROM ${marks} WHERE at < $1 FOR UPDATE SKIP LOCKED)`, [now - MARK_TTL_MS]);
}
