import type pg from 'pg';
import { ident, inTransaction } from '../db/sql.ts';
import { MESSAGE_PREFIX } from '../db/messages.ts';
import { ensureMarks, marksSince } from './marks.ts';
import { commentStatements, createTableStatements, qualified, type TableShape } from './shape.ts';
import { bookkeeping, type SyncSchemas } from '../syncdb/schemas.ts';

/**
 * A table built from an upstream one, as a rebuild and its swap see it: the upstream table's
 * id (the key of `_tables`), its name in the sync's live schema (and in its swap schema while
 * it is rebuilt), its shape in either schema, and the record of how it was built that the
 * swap schema's `_tables` keeps.
 */
export interface BuiltTable {
  tableId: string;
  name: string;
  /** The sync's schemas (src/syncdb/schemas.ts). */
  schemas: SyncSchemas;
  shapeIn(schema: string): TableShape;
  record: unknown;
}

/** Records how a table was built, with the table's change (same transaction). */
async function saveBuilt(client: pg.ClientBase, table: BuiltTable): Promise<void> {
  await client.query(
    `INSERT INTO ${bookkeeping(table.schemas, '_tables')} (upstream_id, db_name, mapping) VALUES ($1, $2, $3)
     ON CONFLICT (upstream_id) DO UPDATE SET db_name = excluded.db_name, mapping = excluded.mapping, built_at = now()`,
    [table.tableId, table.name, JSON.stringify(table.record)],
  );
}

/** Readers hold locks only for a query; a stuck one must not stall the sync forever. */
const LOCK_TIMEOUT = ["lock_timeout = '30s'"];
/** Column text as the decoder's replication session prints it (src/decoder/stream.ts). */
const TEXT_FORMAT = ["TimeZone = 'UTC'", "DateStyle = 'ISO, MDY'", "IntervalStyle = 'postgres'", 'extra_float_digits = 1'];

type Column = { name: string; oid: number };

async function columnsOf(client: pg.PoolClient, schema: string, table: string): Promise<Column[]> {
  const { rows } = await client.query<{ name: string; oid: number }>(
    `SELECT attname AS name, atttypid::int AS oid FROM pg_attribute
      WHERE attrelid = format('%I.%I', $1::text, $2::text)::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    [schema, table],
  );
  return rows;
}

const textArray = (alias: string, columns: Column[]) => `ARRAY[${columns.map((c) => `${alias}.${ident(c.name)}::text`).join(', ')}]`;
const rowMessage = (kind: string, priorArray: string, nextArray: string) =>
  `pg_logical_emit_message(true, '${MESSAGE_PREFIX.swapRow}', json_build_array(${kind}, ${priorArray}, ${nextArray})::text)`;

/** Tells the decoder the columns of the rows that follow, and the table (schema and name) they are events of. */
async function announceColumns(client: pg.PoolClient, schema: string, table: string, prior: Column[], next: Column[]): Promise<void> {
  await client.query('SELECT pg_logical_emit_message(true, $1, $2)', [
    MESSAGE_PREFIX.swapColumns,
    JSON.stringify({ schema, table, prior: prior.map((c) => [c.name, c.oid]), next: next.map((c) => [c.name, c.oid]) }),
  ]);
}

/** Every row of a table in `from` as one kind of change, events of the live schema's table (a table that arrives or goes whole). */
async function emitEvery(client: pg.PoolClient, kind: 'inserted' | 'deleted', schemas: SyncSchemas, from: string, table: string): Promise<void> {
  const columns = await columnsOf(client, from, table);
  await announceColumns(client, schemas.live, table, columns, columns);
  const row = textArray('t', columns);
  const message = kind === 'inserted' ? rowMessage("'inserted'", 'NULL::text[]', row) : rowMessage("'deleted'", row, 'NULL::text[]');
  await client.query(`SELECT count(${message}) FROM ${ident(from)}.${ident(table)} t`);
}

/**
 * Whether a column's value differs between the old row `o` and the new row `n`, by the rule
 * of docs/events.md: a column only one table has differs where it holds a value there; a
 * retyped one wherever it holds a value (the decoder keeps only rows whose JSON changed); any
 * other where its text differs.
 */
function differs(column: string, prior: Map<string, number>, next: Map<string, number>): string {
  const c = ident(column);
  if (!prior.has(column)) return `n.${c} IS NOT NULL`;
  if (!next.has(column)) return `o.${c} IS NOT NULL`;
  if (prior.get(column) !== next.get(column)) return `(o.${c} IS NOT NULL OR n.${c} IS NOT NULL)`;
  return `o.${c}::text IS DISTINCT FROM n.${c}::text`;
}

/**
 * The rebuild itself is no event (it happened in the swap schema, outside the publication),
 * but the rows that differ between the old and the new table are: the decoder gets them as
 * logical messages in the swap's own transaction, so they commit, or not, with the swap.
 * A value in a column added, removed, renamed or retyped is such a difference, so folding a
 * record's events always gives its row (docs/events.md). A renamed table is another
 * collection: so that folding each collection's events gives its table, the rows leave the
 * old one (deleted) and arrive in the new one (inserted).
 */
async function emitDifferences(client: pg.PoolClient, schemas: SyncSchemas, table: string, previous: string | undefined): Promise<void> {
  if (!previous) return emitEvery(client, 'inserted', schemas, schemas.swap, table);
  if (previous !== table) {
    await emitEvery(client, 'deleted', schemas, schemas.live, previous);
    return emitEvery(client, 'inserted', schemas, schemas.swap, table);
  }
  const next = await columnsOf(client, schemas.swap, table);
  const prior = await columnsOf(client, schemas.live, previous);
  await announceColumns(client, schemas.live, table, prior, next);
  const priorTypes = new Map(prior.map((c) => [c.name, c.oid]));
  const nextTypes = new Map(next.map((c) => [c.name, c.oid]));
  const columns = new Set([...priorTypes.keys(), ...nextTypes.keys()]);
  const changed = [...columns].map((c) => differs(c, priorTypes, nextTypes)).join(' OR ') || 'false';
  const n = `${ident(schemas.swap)}.${ident(table)}`;
  await client.query(
    `SELECT count(${rowMessage('d.kind', 'd.prior', 'd.next')}) FROM (
       SELECT CASE WHEN o.id IS NULL THEN 'inserted' WHEN n.id IS NULL THEN 'deleted' ELSE 'updated' END AS kind,
              CASE WHEN o.id IS NULL THEN NULL ELSE ${textArray('o', prior)} END AS prior,
              CASE WHEN n.id IS NULL THEN NULL ELSE ${textArray('n', next)} END AS next
         FROM ${ident(schemas.live)}.${ident(previous)} o FULL JOIN ${n} n ON o.id = n.id
        WHERE o.id IS NULL OR n.id IS NULL OR ${changed}) d`,
  );
}

/** A fresh, empty table in the swap schema for a rebuild; a leftover of an interrupted one goes first. */
export async function prepareRebuild(db: pg.Pool, mapping: BuiltTable): Promise<void> {
  const shape = mapping.shapeIn(mapping.schemas.swap);
  await inTransaction(
    db,
    async (client) => {
      await client.query(`DROP TABLE IF EXISTS ${qualified(shape)}`);
      for (const statement of createTableStatements(shape)) await client.query(statement);
    },
    LOCK_TIMEOUT,
  );
}

/** Records the rebuilt copy may hold older than the old table does: the swap waits for them. */
class WritesSinceRebuild extends Error {
  constructor(readonly marks: Array<{ id: string; at: number }>) {
    super('records written through the proxy since the rebuild began');
  }
}

/**
 * Proxied writes (writer/marks.ts) made during a rebuild went to the old table, and the
 * rebuilt copy may predate them. With a guard, the swap shuts writes out of the old table
 * before it drops it, then reads the marks made since `since`; if any is not `covered`
 * (fetched again into the new table since), nothing is swapped and they are returned, to be
 * fetched and swapped again.
 */
export interface SwapGuard {
  since: number;
  covered(id: string, at: number): boolean;
}

/**
 * Puts a rebuilt table in place of the old one in one transaction: readers see the old
 * table until the commit and the new one after, never a half-built one. The record of
 * the new mapping commits with it. A logical message marks the swap in the WAL for the
 * decoder. Returns the marks that held it back (see SwapGuard), or none once swapped.
 */
export async function swapIn(db: pg.Pool, mapping: BuiltTable, guard?: SwapGuard): Promise<Array<{ id: string; at: number }>> {
  if (guard) await ensureMarks(db, mapping.schemas);
  try {
    await swapInTransaction(db, mapping, guard);
    return [];
  } catch (error) {
    if (error instanceof WritesSinceRebuild) return error.marks;
    throw error;
  }
}

async function swapInTransaction(db: pg.Pool, mapping: BuiltTable, guard: SwapGuard | undefined): Promise<void> {
  await inTransaction(
    db,
    async (client) => {
      const { live, swap } = mapping.schemas;
      const tables = bookkeeping(mapping.schemas, '_tables');
      const { rows } = await client.query<{ upstream_id: string; db_name: string }>(
        `SELECT upstream_id, db_name FROM ${tables} WHERE upstream_id = $1 OR db_name = $2 FOR UPDATE`,
        [mapping.tableId, mapping.name],
      );
      const previous = rows.find((r) => r.upstream_id === mapping.tableId);
      const old = previous ? `${ident(live)}.${ident(previous.db_name)}` : undefined;
      const oldExists = old !== undefined && (await client.query('SELECT to_regclass($1) IS NOT NULL AS found', [old])).rows[0].found;
      if (oldExists) {
        // The lock the DROP takes anyway, taken first (never upgraded from a weaker one, which
        // a proxied write's first statement, holding a read lock on the table, would deadlock
        // with): it waits for writes in progress and holds new ones back, so every write that
        // got in is visible with its mark to the statements below. Taken before the tables are
        // compared: a write committed between the comparison and the swap would be an event
        // before the swap's, which then carried an older prior (found by the simulation).
        // Readers and writers of the old table wait from here to the commit; a held-back write
        // names the table again once it is through and reaches the new one.
        await client.query(`LOCK TABLE ${old} IN ACCESS EXCLUSIVE MODE`);
      }
      await emitDifferences(client, mapping.schemas, mapping.name, previous?.db_name);
      if (guard && oldExists) {
        const uncovered = (await marksSince(client, live, mapping.tableId, guard.since)).filter((m) => !guard.covered(m.id, m.at));
        if (uncovered.length > 0) throw new WritesSinceRebuild(uncovered);
      }
      if (old) await client.query(`DROP TABLE IF EXISTS ${old}`);
      // Another upstream table still holds the name (two tables traded names): move it
      // aside; its own rebuild, due in this cycle, gives it its new name.
      for (const holder of rows.filter((r) => r.upstream_id !== mapping.tableId)) {
        const aside = `${holder.db_name.slice(0, 40)}_moving_${holder.upstream_id.toLowerCase()}`;
        await client.query(`ALTER TABLE ${ident(live)}.${ident(holder.db_name)} RENAME TO ${ident(aside)}`);
        await client.query(`UPDATE ${tables} SET db_name = $2 WHERE upstream_id = $1`, [holder.upstream_id, aside]);
      }
      await client.query(`ALTER TABLE ${ident(swap)}.${ident(mapping.name)} SET SCHEMA ${ident(live)}`);
      await saveBuilt(client, mapping);
      await client.query('SELECT pg_logical_emit_message(true, $1, $2)', [
        MESSAGE_PREFIX.swap,
        JSON.stringify({ schema: live, table: mapping.name, upstream_id: mapping.tableId, previous: previous?.db_name ?? null }),
      ]);
    },
    [...LOCK_TIMEOUT, ...TEXT_FORMAT],
  );
}

/** Same shape, new upstream names: only the COMMENTs and the stored mapping change. */
export async function refreshComments(db: pg.Pool, mapping: BuiltTable): Promise<void> {
  await inTransaction(
    db,
    async (client) => {
      for (const statement of commentStatements(mapping.shapeIn(mapping.schemas.live))) await client.query(statement);
      await saveBuilt(client, mapping);
    },
    LOCK_TIMEOUT,
  );
}

/** The upstream table is gone: so is ours. */
export async function dropTable(db: pg.Pool, mapping: BuiltTable): Promise<void> {
  await inTransaction(
    db,
    async (client) => {
      const { live } = mapping.schemas;
      const tables = bookkeeping(mapping.schemas, '_tables');
      const { rows } = await client.query<{ db_name: string }>(`SELECT db_name FROM ${tables} WHERE upstream_id = $1`, [mapping.tableId]);
      const name = rows[0]?.db_name ?? mapping.name;
      const table = `${ident(live)}.${ident(name)}`;
      // The table's records are gone with it: each is a deleted event.
      if ((await client.query('SELECT to_regclass($1) IS NOT NULL AS found', [table])).rows[0].found) {
        await emitEvery(client, 'deleted', mapping.schemas, live, name);
      }
      await client.query(`DROP TABLE IF EXISTS ${table}`);
      await client.query(`DELETE FROM ${tables} WHERE upstream_id = $1`, [mapping.tableId]);
      await client.query('SELECT pg_logical_emit_message(true, $1, $2)', [
        MESSAGE_PREFIX.drop,
        JSON.stringify({ schema: live, table: mapping.name, upstream_id: mapping.tableId }),
      ]);
    },
    [...LOCK_TIMEOUT, ...TEXT_FORMAT],
  );
}
