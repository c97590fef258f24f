import { createHash } from 'node:crypto';
import type pg from 'pg';
import { ident } from '../db/sql.ts';
import { type Mark, markStatement, marksSince, unmarkedSince } from './marks.ts';
import { columnList, qualified, recordDefinition, type TableShape } from './shape.ts';

export type Row = Record<string, unknown>;

/** Marks (marks.ts): leave one per row written. */
export interface MarkOptions {
  /** A write the sweep must not undo (the proxy's): marks its rows, in the same statement. */
  mark?: Mark;
}

/**
 * Writes rows that are new or differ from what the table holds, and nothing else
 *. Unchanged rows are filtered out before the INSERT, so they are not
 * even locked: a sweep over an unchanged base writes no WAL and makes no events.
 * Returns how many rows were inserted or updated.
 */
export async function upsertRows(client: pg.Pool | pg.ClientBase, shape: TableShape, rows: Row[], marks: MarkOptions = {}): Promise<number> {
  const { inserted, updated } = await upsertRowsCounted(client, shape, rows, marks);
  return inserted + updated;
}

/** upsertRows, telling rows that were not there (inserted) from rows that differed (updated). */
export async function upsertRowsCounted(
  client: pg.Pool | pg.ClientBase,
  shape: TableShape,
  rows: Row[],
  marks: MarkOptions = {},
): Promise<{ inserted: number; updated: number }> {
  if (rows.length === 0) return { inserted: 0, updated: 0 };
  const { key, differing } = upsertParts(shape);
  const marked = marks.mark ? `, marked AS (${markStatement(shape.schema, `SELECT ${key} FROM incoming`, '$2', '$3')})` : '';
  const sql = `${differing(marked)}, ${counted(shape, 'differing')}`;
  const result = await run<{ inserted: number; updated: number }>(client, sql, [
    JSON.stringify(uniqueRows(shape, rows)),
    ...(marks.mark ? [marks.mark.table, marks.mark.at] : []),
  ]);
  return result.rows[0]!;
}

/**
 * upsertRows for rows fetched upstream at `since` (less the clock margin): rows marked at or
 * after it (a proxied write, marks.ts) are left as the table has them. Returns how many were
 * written, and the keys held back that way among rows that differ: their fetch may be older
 * than the marked write or newer, so they are to be fetched again.
 */
export async function upsertUnlessMarked(
  client: pg.ClientBase,
  shape: TableShape,
  rows: Row[],
  marks: { table: string; since: number },
): Promise<{ written: number; inserted: number; held: string[] }> {
  if (rows.length === 0) return { written: 0, inserted: 0, held: [] };
  const unique = uniqueRows(shape, rows);
  const { key, differing } = upsertParts(shape);
  const upsert = `${differing('')}, changed AS (
      SELECT d.* FROM differing d WHERE ${unmarkedSince(shape.schema, `d.${key}`, '$2', '$3')}
    ), ${counted(shape, 'changed')}`;
  const { rows: counts } = await run<{ inserted: number; updated: number }>(client, upsert, [JSON.stringify(unique), marks.table, marks.since]);
  const { inserted, updated } = counts[0]!;
  const written = inserted + updated;
  // Usually no row is marked: one look at the marks, and only marked rows are compared.
  const keys = unique.map((row) => String(row[shape.key]));
  const marked = await marksSince(client, shape.schema, marks.table, marks.since, keys);
  if (marked.length === 0) return { written, inserted, held: [] };
  const markedKeys = new Set(marked.map((m) => m.id));
  const compared = unique.filter((row) => markedKeys.has(String(row[shape.key])));
  const { rows: held } = await run<{ k: string }>(client, `${differing('')} SELECT d.${key}::text AS k FROM differing d`, [JSON.stringify(compared)]);
  return { written, inserted, held: held.map((h) => h.k) };
}

/**
 * The CTE `written` (the upsert of CTE `from`) and the statement that counts what it inserted
 * and updated: xmax is 0 on a row version an INSERT made, and set on one ON CONFLICT … UPDATE made.
 */
const counted = (shape: TableShape, from: string) =>
  `written AS (${insertFrom(shape, from)} RETURNING (xmax = 0) AS inserted)
    SELECT count(*) FILTER (WHERE inserted)::int AS inserted, count(*) FILTER (WHERE NOT inserted)::int AS updated FROM written`;

/** One row per key; the last one wins (a later page or write is newer). */
function uniqueRows(shape: TableShape, rows: Row[]): Row[] {
  const byKey = new Map<unknown, Row>();
  for (const row of rows) byKey.set(row[shape.key], row);
  return [...byKey.values()];
}

/** The CTEs `incoming` ($1, JSON rows) and `differing` (those new or unlike the table's), with `extra` CTEs between. */
function upsertParts(shape: TableShape) {
  const table = qualified(shape);
  const key = ident(shape.key);
  const values = valueColumns(shape);
  const current = values.map((c) => `cur.${ident(c.name)}`).join(', ');
  const incoming = values.map((c) => `i.${ident(c.name)}`).join(', ');
  const differing = (extra: string) => `
    WITH incoming AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${recordDefinition(shape)})
    )${extra}, differing AS (
      SELECT i.* FROM incoming i LEFT JOIN ${table} cur ON cur.${key} = i.${key}
       WHERE cur.${key} IS NULL OR ${differs(values, current, incoming)}
    )`;
  return { key, differing };
}

const valueColumns = (shape: TableShape) => shape.columns.filter((c) => c.name !== shape.key);

/** ROW(...) keeps the comparison a row comparison even with a single value column. */
const differs = (values: unknown[], a: string, b: string) => (values.length === 0 ? 'false' : `ROW(${a}) IS DISTINCT FROM ROW(${b})`);

/** The INSERT … ON CONFLICT of the rows of CTE `from`; a row equal to the table's by then is left alone. */
function insertFrom(shape: TableShape, from: string): string {
  const values = valueColumns(shape);
  const target = values.map((c) => `t.${ident(c.name)}`).join(', ');
  const excluded = values.map((c) => `excluded.${ident(c.name)}`).join(', ');
  const assignments = values.map((c) => `${ident(c.name)} = excluded.${ident(c.name)}`).join(', ');
  return `INSERT INTO ${qualified(shape)} AS t (${columnList(shape)})
    SELECT ${columnList(shape)} FROM ${from}
    ON CONFLICT (${ident(shape.key)}) DO ${values.length === 0 ? 'NOTHING' : `UPDATE SET ${assignments} WHERE ${differs(values, target, excluded)}`}`;
}

/**
 * Named, so each connection parses and plans it once: for the proxy's one-record writes the
 * planning was a good part of the statement's time. The name is the text's digest (pg refuses
 * one name for two texts); a table rebuilt meanwhile is re-planned by the server.
 */
function run<R extends pg.QueryResultRow = pg.QueryResultRow>(client: pg.Pool | pg.ClientBase, sql: string, values: unknown[]) {
  return client.query<R>({ name: `upsert_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`, text: sql, values });
}

/** Deletes rows by key; returns how many went. With `mark`, marks them too (a deletion the sweep must not undo). */
export async function deleteRows(
  client: pg.Pool | pg.ClientBase,
  shape: Pick<TableShape, 'schema' | 'name' | 'key'>,
  keys: string[],
  marks: Pick<MarkOptions, 'mark'> = {},
): Promise<number> {
  if (keys.length === 0) return 0;
  const remove = `DELETE FROM ${qualified(shape)} WHERE ${ident(shape.key)} = ANY($1::text[])`;
  const result = marks.mark
    ? await client.query(`WITH marked AS (${markStatement(shape.schema, 'SELECT unnest($1::text[])', '$2', '$3')}) ${remove}`, [
        keys,
        marks.mark.table,
        marks.mark.at,
      ])
    : await client.query(remove, [keys]);
  return result.rowCount ?? 0;
}
