import type pg from 'pg';
import { ident } from '../db/sql.ts';
import { qualified, type TableShape } from './shape.ts';

type Db = pg.Pool | pg.ClientBase;
type Table = Pick<TableShape, 'schema' | 'name' | 'key'>;

/** Rows whose column holds this value (NULL too): one part of a table that several sources fill. */
export interface Within {
  column: string;
  value: string | null;
}

/**
 * The rows whose newest version is older than `since` in a version table (`tbl`, `id`,
 * `version`): a listing begun at `since` would have written them again had they still been
 * there. `within`: only the rows that listing covered. `seen`: keys the listing showed,
 * kept whatever their version (a listing that wrote only what differed). Returns how many went.
 */
export async function deleteUnversionedSince(
  client: Db,
  shape: Table,
  options: { versions: string; tableName: string; since: number; within?: Within; seen?: string[] },
): Promise<number> {
  const key = `t.${ident(shape.key)}`;
  const values: unknown[] = [options.tableName, options.since];
  let where = `NOT EXISTS (SELECT 1 FROM ${options.versions} v WHERE v.tbl = $1 AND v.id = ${key} AND v.version >= $2)`;
  if (options.within) {
    values.push(options.within.value);
    where += ` AND t.${ident(options.within.column)} IS NOT DISTINCT FROM $${values.length}`;
  }
  if (options.seen) {
    values.push(options.seen);
    where += ` AND NOT (${key} = ANY($${values.length}::text[]))`;
  }
  const result = await client.query(`DELETE FROM ${qualified(shape)} t WHERE ${where}`, values);
  return result.rowCount ?? 0;
}

/**
 * Parents' child rows (by `link`) other than those each parent keeps: a whole list read says
 * they are gone. One statement for every parent (a page of invoices is a hundred parents, and
 * one statement each made its write a hundred round trips). `within` confines it to the rows
 * whose column holds that value (NULL too), where a parent's id is not unique across the table.
 */
export async function deleteChildrenExcept(
  client: Db,
  shape: Table,
  options: { link: string; parents: ReadonlyMap<string, string[]>; within?: Within },
): Promise<number> {
  if (options.parents.size === 0) return 0;
  const link = `t.${ident(options.link)}`;
  const pairs = [...options.parents].flatMap(([parentId, keep]) => keep.map((id) => [parentId, id] as const));
  const values: unknown[] = [[...options.parents.keys()], pairs.map((p) => p[0]), pairs.map((p) => p[1])];
  let where = `${link} = ANY($1::text[])
    AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS k(parent_id, id) WHERE k.parent_id = ${link} AND k.id = t.${ident(shape.key)})`;
  if (options.within) {
    values.push(options.within.value);
    where += ` AND t.${ident(options.within.column)} IS NOT DISTINCT FROM $4`;
  }
  const result = await client.query(`DELETE FROM ${qualified(shape)} t WHERE ${where}`, values);
  return result.rowCount ?? 0;
}
