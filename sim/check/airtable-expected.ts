/**
 * What an Airtable base should look like in PostgreSQL, derived by the checker itself from the
 * upstream objects (the fake's metadata and record JSON) and the documented rules: docs/airtable.md
 * ("What do the tables look like?", "Column types", "Settings"), the spec's "Field type to column
 * type" and UPSTREAMS.md's cell JSON. Nothing here comes from src/airtable: the product's
 * mapping is what this checks, so it must not also be what decides the answer.
 */
import type { FieldJson, RecordJson, TableJson } from '../../fakes/airtable/index.ts';
import { uniqueNames } from './airtable-names.ts';

/** The two settings that choose a column's type (docs/airtable.md "Settings"). */
export interface TypeSettings {
  lookup_as: 'text[]' | 'text';
  intelligent_cast: boolean;
}

/** The documented defaults: what a sync created without settings has. */
export const DOCUMENTED_DEFAULTS: TypeSettings = { lookup_as: 'text[]', intelligent_cast: true };

export type ColumnType = 'text' | 'text[]' | 'numeric' | 'boolean' | 'date' | 'timestamptz' | 'jsonb';

export interface ExpectedColumn {
  name: string;
  type: ColumnType;
  /** null for `id` and `created_time`, which every table has. */
  field: FieldJson | null;
  /** The cell JSON (undefined when Airtable leaves the cell out) → the column's value; null is SQL NULL. */
  value(cell: unknown): unknown;
}

export interface ExpectedTable {
  table: TableJson;
  name: string;
  columns: ExpectedColumn[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const asArray = (cell: unknown): unknown[] => (cell === undefined || cell === null ? [] : Array.isArray(cell) ? cell : [cell]);
/** An empty array is an empty cell: NULL, like any other empty cell. */
const orNull = <T>(items: T[]): T[] | null => (items.length > 0 ? items : null);

/** Formula errors and specials read as their marker: `NaN`, `Infinity`, `#ERROR!`. */
function special(o: Record<string, unknown>): string | undefined {
  if ('specialValue' in o) return String(o.specialValue);
  if ('error' in o) return String(o.error);
  return undefined;
}

/**
 * One value of a multi-valued cell (a lookup's or a rollup's item) as text, the way the same
 * value's own column reads: a collaborator is its email, an attachment or button its URL, a
 * barcode its text, AI text its value; numbers and booleans as JS prints them. null: no item.
 */
export function itemText(item: unknown): string | null {
  if (item === null || item === undefined) return null;
  if (typeof item === 'string') return item === '' ? null : item;
  if (typeof item === 'number' || typeof item === 'boolean') return String(item);
  if (isObject(item)) {
    if (typeof item.email === 'string') return item.email;
    if (typeof item.url === 'string') return item.url;
    if ('label' in item) return null; // a button without a URL
    if (typeof item.text === 'string') return item.text;
    if ('state' in item && 'value' in item) return typeof item.value === 'string' && item.value !== '' ? item.value : null;
    const marker = special(item);
    if (marker !== undefined) return marker;
  }
  return JSON.stringify(item);
}

const textItems = (cell: unknown) =>
  orNull(
    asArray(cell)
      .map(itemText)
      .filter((t): t is string => t !== null),
  );
const plainText = (cell: unknown) => (typeof cell === 'string' && cell !== '' ? cell : null);
const number = (cell: unknown) => (typeof cell === 'number' && Number.isFinite(cell) ? cell : null);
/** Emails of collaborator objects, one or many. */
const emails = (cell: unknown) => orNull(asArray(cell).flatMap((u) => (isObject(u) && typeof u.email === 'string' ? [u.email] : [])));

/** A formula's result as text; an array as its JSON; an error or special as its marker. */
function formulaText(cell: unknown): string | null {
  if (cell === undefined || cell === null || cell === '') return null;
  if (Array.isArray(cell)) return cell.length > 0 ? JSON.stringify(cell) : null;
  if (typeof cell === 'string') return cell;
  if (typeof cell === 'number' || typeof cell === 'boolean') return String(cell);
  return (isObject(cell) && special(cell)) || JSON.stringify(cell);
}

/** Seconds → `h:mm:ss[.fff]`: hours unbounded, milliseconds only when there are any (no trailing zeros). */
export function durationText(cell: unknown): string | null {
  if (typeof cell !== 'number' || !Number.isFinite(cell)) return null;
  const ms = Math.round(Math.abs(cell) * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  const fraction =
    ms % 1000 === 0
      ? ''
      : `.${String(ms % 1000)
          .padStart(3, '0')
          .replace(/0+$/, '')}`;
  const sign = cell < 0 && ms > 0 ? '-' : '';
  return `${sign}${Math.floor(ms / 3_600_000)}:${two(Math.floor(ms / 60_000) % 60)}:${two(Math.floor(ms / 1000) % 60)}${fraction}`;
}

/** Barcode: the barcode's text when it is a (decimal) number, else NULL. */
function barcodeNumber(cell: unknown): string | null {
  const text = isObject(cell) ? cell.text : undefined;
  return typeof text === 'string' && /^-?\d+(\.\d+)?$/.test(text) ? text : null;
}

/** Field types whose values are numbers: a rollup with one of these results is `numeric`. */
const NUMBER_RESULTS = new Set(['number', 'currency', 'percent', 'rating', 'duration', 'autoNumber', 'count']);

type Typed = Pick<ExpectedColumn, 'type' | 'value'>;

/** The "Column types" table of docs/airtable.md, one row per case. */
function typeOf(field: FieldJson, settings: TypeSettings): Typed {
  switch (field.type) {
    case 'singleLineText':
    case 'multilineText':
    case 'richText':
    case 'email':
    case 'url':
    case 'phoneNumber':
    case 'singleSelect':
    case 'externalSyncSource':
      return { type: 'text', value: plainText };
    case 'multipleSelects':
      return { type: 'text[]', value: (cell) => orNull(asArray(cell).filter((s): s is string => typeof s === 'string')) };
    case 'number':
    case 'currency':
    case 'percent':
    case 'rating':
    case 'autoNumber':
    case 'count':
      return { type: 'numeric', value: number };
    case 'barcode':
      return { type: 'numeric', value: barcodeNumber };
    case 'checkbox':
      return { type: 'boolean', value: (cell) => cell === true };
    case 'date':
      return { type: 'date', value: plainText };
    case 'dateTime':
    case 'createdTime':
    case 'lastModifiedTime':
      return { type: 'timestamptz', value: plainText };
    case 'duration':
      return { type: 'text', value: durationText };
    case 'multipleAttachments':
      return { type: 'text[]', value: (cell) => orNull(asArray(cell).flatMap((a) => (isObject(a) && typeof a.url === 'string' ? [a.url] : []))) };
    case 'singleCollaborator':
    case 'multipleCollaborators':
      return { type: 'text[]', value: emails };
    case 'createdBy':
    case 'lastModifiedBy':
      return { type: 'text', value: (cell) => emails(cell)?.[0] ?? null };
    case 'button':
      return { type: 'text', value: (cell) => (isObject(cell) && typeof cell.url === 'string' ? cell.url : null) };
    case 'formula':
      return { type: 'text', value: formulaText };
    case 'aiText':
      return { type: 'text', value: (cell) => (isObject(cell) ? plainText(cell.value) : plainText(cell)) };
    case 'multipleRecordLinks': {
      const ids = (cell: unknown) => orNull(asArray(cell).filter((id): id is string => typeof id === 'string'));
      // Intelligent cast and "allow linking to multiple records" off: one text, the first id.
      if (settings.intelligent_cast && field.options?.prefersSingleRecordLink === true) return { type: 'text', value: (cell) => ids(cell)?.[0] ?? null };
      return { type: 'text[]', value: ids };
    }
    case 'multipleLookupValues':
      if (settings.lookup_as === 'text') return { type: 'text', value: (cell) => textItems(cell)?.join(', ') ?? null };
      return { type: 'text[]', value: textItems };
    case 'rollup': {
      const result = field.options?.result;
      const resultType = isObject(result) ? result.type : undefined;
      if (typeof resultType === 'string' && NUMBER_RESULTS.has(resultType)) return { type: 'numeric', value: number };
      return { type: 'text[]', value: textItems };
    }
    default:
      // A type the docs' table does not know: the cell as it came.
      return { type: 'jsonb', value: (cell) => (cell === undefined ? null : cell) };
  }
}

/** Every table of the base as the database should have it: names unique across tables and within each. */
export function expectedTables(tables: TableJson[], settings: TypeSettings): ExpectedTable[] {
  const tableNames = uniqueNames(tables, 'table');
  return tables.map((table) => {
    const fieldNames = uniqueNames(table.fields, 'field', ['id', 'created_time']);
    const columns: ExpectedColumn[] = [
      { name: 'id', type: 'text', field: null, value: plainText },
      { name: 'created_time', type: 'timestamptz', field: null, value: plainText },
      ...table.fields.map((field) => ({ name: fieldNames.get(field.id)!, field, ...typeOf(field, settings) })),
    ];
    return { table, name: tableNames.get(table.id)!, columns };
  });
}

/** One record (the REST API's JSON, fields by name) → the row: column name → value. */
export function expectedRow(expected: ExpectedTable, record: RecordJson): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (const column of expected.columns) {
    if (column.field === null) row[column.name] = column.value(column.name === 'id' ? record.id : record.createdTime);
    else row[column.name] = column.value(Object.hasOwn(record.fields, column.field.name) ? record.fields[column.field.name] : undefined);
  }
  return row;
}
