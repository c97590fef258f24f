import type pg from 'pg';
import type { TableShape } from '../writer/shape.ts';
import type { Row } from '../writer/upsert.ts';
import { converters } from './cells.ts';
import type { ColumnMapping, TableMapping } from './schema.ts';
import type { AirtableRecord } from './types.ts';

export type TargetSchema = 'public' | 'public_swap';

function columnComment(column: ColumnMapping): string {
  if (column.fieldId === null) {
    return column.name === 'id' ? 'Airtable record id' : 'Airtable record creation time (createdTime)';
  }
  return `Airtable field "${column.upstreamName}" (${column.fieldId}, ${column.upstreamType})`;
}

/** The writer's view of a mapped table, with the COMMENTs that make `\d+` show the origin. */
export function shapeOf(mapping: TableMapping, schema: TargetSchema): TableShape {
  return {
    schema,
    name: mapping.name,
    key: 'id',
    comment: `Airtable table "${mapping.upstreamName}" (${mapping.tableId})`,
    columns: mapping.columns.map((c) => ({ name: c.name, type: c.type, comment: columnComment(c) })),
  };
}

/** A listed record (fields keyed by field id) → a row keyed by column name. */
export function rowOf(mapping: TableMapping, record: AirtableRecord): Row {
  const row: Row = {};
  for (const column of mapping.columns) {
    if (column.fieldId === null) {
      row[column.name] = column.name === 'id' ? record.id : record.createdTime;
    } else {
      row[column.name] = converters[column.converter](record.fields[column.fieldId]);
    }
  }
  return row;
}

/** The mappings the sync database's tables were built with (public_swap._tables). */
export async function loadBuilt(db: pg.Pool | pg.ClientBase): Promise<Map<string, TableMapping>> {
  const { rows } = await db.query<{ upstream_id: string; mapping: TableMapping }>('SELECT upstream_id, mapping FROM public_swap._tables');
  return new Map(rows.map((r) => [r.upstream_id, r.mapping]));
}

export async function saveBuilt(db: pg.ClientBase, mapping: TableMapping): Promise<void> {
  await db.query(
    `INSERT INTO public_swap._tables (upstream_id, db_name, mapping) VALUES ($1, $2, $3)
     ON CONFLICT (upstream_id) DO UPDATE SET db_name = excluded.db_name, mapping = excluded.mapping, built_at = now()`,
    [mapping.tableId, mapping.name, JSON.stringify(mapping)],
  );
}
