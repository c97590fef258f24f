import type pg from 'pg';
import type { TableShape } from '../writer/shape.ts';
import type { BuiltTable } from '../writer/swap.ts';
import { encoderFor, escapeText, type Encoder } from '../writer/copy.ts';
import type { Row } from '../writer/upsert.ts';
import type { SyncAttachmentLinks } from '../attachments/links.ts';
import { type CellPlace, converters } from './cells.ts';
import type { ColumnMapping, TableMapping } from './schema.ts';
import type { AirtableRecord } from './types.ts';
import { bookkeeping, type SyncSchemas } from '../syncdb/schemas.ts';

function columnComment(column: ColumnMapping): string {
  if (column.fieldId === null) {
    return column.name === 'id' ? 'Airtable record id' : 'Airtable record creation time (createdTime)';
  }
  return `Airtable field "${column.upstreamName}" (${column.fieldId}, ${column.upstreamType})`;
}

/** The writer's view of a mapped table, with the COMMENTs that make `\d+` show the origin. */
/** `schema`: the sync's live schema, or its swap schema for a rebuild (src/syncdb/schemas.ts). */
export function shapeOf(mapping: TableMapping, schema: string): TableShape {
  return {
    schema,
    name: mapping.name,
    key: 'id',
    comment: `Airtable table "${mapping.upstreamName}" (${mapping.tableId})`,
    columns: mapping.columns.map((c) => ({ name: c.name, type: c.type, comment: columnComment(c) })),
  };
}

type Cell = { name: string; fieldId: string; convert: (cell: unknown, place: CellPlace) => unknown; encode: Encoder };

/** Per mapping, once: each field column's converter (rowOf runs for every record of a sweep). */
const compiled = new WeakMap<TableMapping, Cell[]>();

function cellsOf(mapping: TableMapping): Cell[] {
  let cells = compiled.get(mapping);
  if (!cells) {
    cells = mapping.columns.flatMap((c) =>
      c.fieldId === null ? [] : [{ name: c.name, fieldId: c.fieldId, convert: converters[c.converter], encode: encoderFor(c.type) }],
    );
    compiled.set(mapping, cells);
  }
  return cells;
}

/**
 * A listed record (fields keyed by field id) → a row keyed by column name. `links`: the sync's
 * stable attachment links, which a mapping built with `stable_attachment_links` needs.
 */
export function rowOf(mapping: TableMapping, record: AirtableRecord, links?: SyncAttachmentLinks): Row {
  const row: Row = { id: record.id, created_time: record.createdTime };
  const fields = record.fields;
  const place: CellPlace = { tableId: mapping.tableId, recordId: record.id, links };
  for (const cell of cellsOf(mapping)) row[cell.name] = cell.convert(fields[cell.fieldId], place);
  return row;
}

/**
 * A listed record straight to a COPY text line, with no row object in between: a
 * rebuild converts every record of a table, and this halves the cost of it.
 */
export function copyLineOf(mapping: TableMapping, record: AirtableRecord, links?: SyncAttachmentLinks): string {
  let line = `${escapeText(record.id)}\t${escapeText(record.createdTime)}`;
  const fields = record.fields;
  const place: CellPlace = { tableId: mapping.tableId, recordId: record.id, links };
  for (const cell of cellsOf(mapping)) {
    const value = cell.convert(fields[cell.fieldId], place);
    line += value === null || value === undefined ? '\t\\N' : `\t${cell.encode(value)}`;
  }
  return `${line}\n`;
}

/** The mappings the sync's tables were built with (`_tables` of its swap schema). */
export async function loadBuilt(db: pg.Pool | pg.ClientBase, schemas: SyncSchemas): Promise<Map<string, TableMapping>> {
  const { rows } = await db.query<{ upstream_id: string; mapping: TableMapping }>(`SELECT upstream_id, mapping FROM ${bookkeeping(schemas, '_tables')}`);
  return new Map(rows.map((r) => [r.upstream_id, r.mapping]));
}

/** A table's mapping as the writer's rebuild and swap take it (writer/swap.ts). */
export function builtTable(mapping: TableMapping, schemas: SyncSchemas): BuiltTable {
  return { tableId: mapping.tableId, name: mapping.name, schemas, shapeIn: (schema) => shapeOf(mapping, schema), record: mapping };
}
