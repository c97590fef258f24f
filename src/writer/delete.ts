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
 * there. `within`: only the rows that listing covered. Returns how many went.
 */
export async function deleteUnversionedSince(
  client: Db,
  shape: Table,
  options: { versions: string; tableName: string; since: number; within?: Within },
): Promise<number> {
  const within = options.within ? ` AND t.${ident(options.within.column)} IS NOT DISTINCT FROM $3` : '';
  const result = await client.query(
    `DELETE FROM ${qualified(shape)} t
      WHERE NOT EXISTS (SELECT 1 FROM ${options.versions} v WHERE v.tbl = $1 AND v.id = t.${ident(shape.key)} AND v.version >= $2)${within}`,
    options.within ? [options.tableName, options.since, options.within.value] : [options.tableName, options.since],
  );
  return result.rowCount ?? 0;
}

/**
 * A parent's child rows (by `link`) other than those in `keep`: a whole list read says they
 * are gone. `within` confines it to the rows whose column holds that value (NULL too), where
 * a parent's id is not unique across the table's rows.
 */
export async function deleteChildrenExcept(
  client: Db,
  shape: Table,
  options: { link: string; parentId: string; keep: string[]; within?: Within },
): Promise<number> {
  const within = options.within ? ` AND ${ident(options.within.column)} IS NOT DISTINCT FROM $3` : '';
  const result = await client.query(
    `DELETE FROM ${qualified(shape)} WHERE ${ident(options.link)} = $1 AND NOT (${ident(shape.key)} = ANY($2::text[]))${within}`,
    options.within ? [options.parentId, options.keep, options.within.value] : [options.parentId, options.keep],
  );
  return result.rowCount ?? 0;
}
