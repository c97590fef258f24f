import { createHash } from 'node:crypto';
import type pg from 'pg';
import { ident } from '../db/sql.ts';
import { type Mark, markStatement, unmarkedSince } from './marks.ts';
import { columnList, qualified, recordDefinition, type TableShape } from './shape.ts';

export type Row = Record<string, unknown>;

/** Marks (marks.ts): leave one per row written, or leave out rows marked since a time. */
export interface MarkOptions {
  /** A write the sweep must not undo (the proxy's): marks its rows, in the same statement. */
  mark?: Mark;
  /** A sweep's write of pages fetched at `since`: rows marked at or after it are left as they are. */
  unlessMarked?: { table: string; since: number };
}

/**
 * Writes rows that are new or differ from what the table holds, and nothing else
 * (DESIGN rule 1). Unchanged rows are filtered out before the INSERT, so they are not
 * even locked: a sweep over an unchanged base writes no WAL and makes no events.
 * Returns how many rows were inserted or updated.
 */
export async function upsertRows(client: pg.Pool | pg.ClientBase, shape: TableShape, rows: Row[], marks: MarkOptions = {}): Promise<number> {
  if (rows.length === 0) return 0;
  // One row per key; the last one wins (a later page or write is newer).
  const byKey = new Map<unknown, Row>();
  for (const row of rows) byKey.set(row[shape.key], row);

  const table = qualified(shape);
  const key = ident(shape.key);
  const values = shape.columns.filter((c) => c.name !== shape.key);
  const current = values.map((c) => `cur.${ident(c.name)}`).join(', ');
  const incoming = values.map((c) => `i.${ident(c.name)}`).join(', ');
  const target = values.map((c) => `t.${ident(c.name)}`).join(', ');
  const excluded = values.map((c) => `excluded.${ident(c.name)}`).join(', ');
  const assignments = values.map((c) => `${ident(c.name)} = excluded.${ident(c.name)}`).join(', ');
  // ROW(...) keeps the comparison a row comparison even with a single value column.
  const differs = (a: string, b: string) => (values.length === 0 ? 'false' : `ROW(${a}) IS DISTINCT FROM ROW(${b})`);

  const marked = marks.mark ? `, marked AS (${markStatement(`SELECT ${key} FROM incoming`, '$2', '$3')})` : '';
  const unmarked = marks.unlessMarked ? ` AND ${unmarkedSince(`i.${key}`, '$2', '$3')}` : '';
  const markValues = marks.mark ? [marks.mark.table, marks.mark.at] : marks.unlessMarked ? [marks.unlessMarked.table, marks.unlessMarked.since] : [];
  const sql = `
    WITH incoming AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${recordDefinition(shape)})
    )${marked}, changed AS (
      SELECT i.* FROM incoming i LEFT JOIN ${table} cur ON cur.${key} = i.${key}
       WHERE (cur.${key} IS NULL OR ${differs(current, incoming)})${unmarked}
    )
    INSERT INTO ${table} AS t (${columnList(shape)})
    SELECT ${columnList(shape)} FROM changed
    ON CONFLICT (${key}) DO ${values.length === 0 ? 'NOTHING' : `UPDATE SET ${assignments} WHERE ${differs(target, excluded)}`}`;
  // Named, so each connection parses and plans it once: for the proxy's one-record writes the
  // planning was a good part of the statement's time. The name is the text's digest (pg refuses
  // one name for two texts); a table rebuilt meanwhile is re-planned by the server.
  const result = await client.query({ name: `upsert_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`, text: sql, values: [JSON.stringify([...byKey.values()]), ...markValues] });
  return result.rowCount ?? 0;
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
    ? await client.query(`WITH marked AS (${markStatement('SELECT unnest($1::text[])', '$2', '$3')}) ${remove}`, [keys, marks.mark.table, marks.mark.at])
    : await client.query(remove, [keys]);
  return result.rowCount ?? 0;
}
