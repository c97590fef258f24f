/**
 * Shared by the "database equals upstream" checkers: reading a table's rows in a comparable
 * form, comparing one column value with what the mapping says it should be (representations
 * only: timestamptz vs ISO text, numeric text vs number, jsonb deep-equal, text[]), and
 * collecting violations with a cap per table.
 */
import type pg from 'pg';
import { ident } from '../../src/db/sql.ts';
import type { Violation } from '../types.ts';

export const CHECK = 'db=upstream';

/** Differences listed per table before one summary line stands for the rest. */
export const DEFAULT_CAP = 20;

export interface DbColumn {
  name: string;
  /** As in the DDL: `text`, `text[]`, `timestamptz`, `double precision` … */
  type: string;
}

export interface DbTable {
  name: string;
  columns: DbColumn[];
  comment: string | null;
}

/** information_schema's spelling of a column type → the DDL spelling the mappings use. */
function ddlType(dataType: string, udtName: string): string {
  if (dataType === 'ARRAY') return `${ddlType(udtName.replace(/^_/, ''), udtName.replace(/^_/, ''))}[]`;
  switch (dataType) {
    case 'timestamp with time zone':
    case 'timestamptz':
      return 'timestamptz';
    case 'int8':
      return 'bigint';
    case 'int4':
      return 'integer';
    case 'float8':
      return 'double precision';
    case 'bool':
      return 'boolean';
    default:
      return dataType;
  }
}

/** The ordinary tables of a schema with their columns (in order) and COMMENTs. */
export async function tablesOf(db: pg.ClientBase, schema: string): Promise<Map<string, DbTable>> {
  const { rows } = await db.query<{
    table_name: string;
    column_name: string | null;
    data_type: string | null;
    udt_name: string | null;
    comment: string | null;
  }>(
    `SELECT t.table_name, c.column_name, c.data_type, c.udt_name,
            obj_description(format('%I.%I', t.table_schema, t.table_name)::regclass, 'pg_class') AS comment
       FROM information_schema.tables t
       LEFT JOIN information_schema.columns c ON c.table_schema = t.table_schema AND c.table_name = t.table_name
      WHERE t.table_schema = $1 AND t.table_type = 'BASE TABLE'
      ORDER BY t.table_name, c.ordinal_position`,
    [schema],
  );
  const out = new Map<string, DbTable>();
  for (const r of rows) {
    let table = out.get(r.table_name);
    if (!table) out.set(r.table_name, (table = { name: r.table_name, columns: [], comment: r.comment }));
    if (r.column_name) table.columns.push({ name: r.column_name, type: ddlType(r.data_type!, r.udt_name!) });
  }
  return out;
}

/** How a column is selected so that its value arrives in a form compare() understands. */
function selectExpression(column: DbColumn): string {
  const name = ident(column.name);
  // numeric and bigint as their exact text (node-pg gives strings anyway; this makes it explicit);
  // date as text, so that no local-time Date is made of it.
  if (column.type === 'numeric' || column.type === 'bigint' || column.type === 'date') return `${name}::text AS ${name}`;
  return name;
}

/** Every row of a table, keyed by `key`, with the given columns. */
export async function rowsOf(
  db: pg.ClientBase,
  schema: string,
  table: string,
  key: string,
  columns: DbColumn[],
): Promise<Map<string, Record<string, unknown>>> {
  const list = columns.map(selectExpression).join(', ');
  const { rows } = await db.query<Record<string, unknown>>(`SELECT ${list} FROM ${ident(schema)}.${ident(table)}`);
  return new Map(rows.map((r) => [String(r[key]), r]));
}

/** A decimal in one spelling: no `+`, no leading zeros, no trailing fractional zeros, no `-0`. */
function canonicalDecimal(text: string): string | undefined {
  const m = /^\s*([-+]?)(\d*)(?:\.(\d*))?\s*$/.exec(text);
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) return undefined;
  const whole = m[2]!.replace(/^0+(?=\d)/, '') || '0';
  const fraction = (m[3] ?? '').replace(/0+$/, '');
  const body = fraction ? `${whole}.${fraction}` : whole;
  return body === '0' ? '0' : `${m[1] === '-' ? '-' : ''}${body}`;
}

function sameNumber(db: unknown, expected: unknown): boolean {
  const a = String(db);
  const b = String(expected);
  const ca = canonicalDecimal(a);
  const cb = canonicalDecimal(b);
  if (ca !== undefined && cb !== undefined && ca === cb) return true;
  // Exponent spellings (a JS number printed as 1e+21) compare as numbers.
  const na = Number(a);
  const nb = Number(b);
  return Number.isFinite(na) && Number.isFinite(nb) && na === nb && (/e/i.test(a) || /e/i.test(b));
}

function timeOf(value: unknown): number | undefined {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'string') {
    const t = Date.parse(value);
    return Number.isNaN(t) ? undefined : t;
  }
  return undefined;
}

/** JSON as jsonb keeps it: `undefined` members dropped, so two values compare on content only. */
export function asJson(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

/** Deep equality of JSON values; object member order does not matter (jsonb does not keep it). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((item, i) => jsonEqual(item, bb[i]));
  }
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b as object, k) && jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/**
 * Whether the database's value of a column of type `type` is the value the mapping produced
 * (`expected`, as written to jsonb_to_recordset). Only representations are normalised.
 */
export function sameValue(type: string, db: unknown, expected: unknown): boolean {
  const want = expected === undefined ? null : expected;
  if (type === 'jsonb') return jsonEqual(db === undefined ? null : db, asJson(want));
  if (db === null || db === undefined || want === null) return (db ?? null) === null && want === null;
  if (type.endsWith('[]')) {
    if (!Array.isArray(db) || !Array.isArray(want) || db.length !== want.length) return false;
    const inner = type.slice(0, -2);
    return db.every((item, i) => sameValue(inner, item, want[i]));
  }
  switch (type) {
    case 'numeric':
    case 'bigint':
    case 'integer':
    case 'double precision':
      return sameNumber(db, want);
    case 'boolean':
      return db === want;
    case 'text':
      // A text column reads as a string: a boolean or number the database holds (a column of
      // another type compared as text) is not its spelling.
      return typeof db === 'string' && db === String(want);
    case 'timestamptz': {
      const a = timeOf(db);
      const b = timeOf(want);
      return a !== undefined && a === b;
    }
    case 'date': {
      if (String(db) === String(want)) return true;
      // A date written with a time part or another spelling: the same calendar day.
      const a = Date.parse(`${String(db)}T00:00:00Z`);
      const b = Date.parse(String(want).length === 10 ? `${String(want)}T00:00:00Z` : String(want));
      return !Number.isNaN(a) && !Number.isNaN(b) && new Date(a).toISOString().slice(0, 10) === new Date(b).toISOString().slice(0, 10);
    }
    default:
      return String(db) === String(want);
  }
}

/** A value as a violation shows it: JSON, a time as ISO text, cut short if long. */
export function show(value: unknown, type?: string): string {
  if (value === undefined || value === null) return 'NULL';
  // Numbers read as text (numeric, bigint) show as the numbers they are.
  const numeric = (type === 'numeric' || type === 'bigint' || type === 'integer') && typeof value === 'string';
  const text = value instanceof Date ? JSON.stringify(value.toISOString()) : numeric ? value : JSON.stringify(value);
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
}

/** Violations of one table, the first `cap` in full, then one line with how many more there were. */
export class TableViolations {
  private readonly details: string[] = [];
  private count = 0;

  constructor(
    private readonly label: string,
    private readonly cap = DEFAULT_CAP,
  ) {}

  add(detail: string): void {
    this.count++;
    if (this.details.length < this.cap) this.details.push(detail);
  }

  get size(): number {
    return this.count;
  }

  into(out: Violation[]): void {
    for (const detail of this.details) out.push({ check: CHECK, detail });
    if (this.count > this.details.length) {
      out.push({ check: CHECK, detail: `${this.label}: ${this.count - this.details.length} more differences not listed (${this.count} in all)` });
    }
  }
}

/**
 * Compares one table's rows with the rows the mapping makes of the upstream objects:
 * the same keys, and in each row every column the same value.
 * `expected`: key → row as the product's mapping code makes it. `columns`: what to compare
 * (those the database and the mapping both have; the caller reports the others).
 * `ignore(key)`: database rows whose presence cannot be judged (not reported as extra).
 * `accept`: per column, a value the database may legitimately hold besides the expected one.
 */
export function compareRows(options: {
  label: string;
  report: TableViolations;
  key: string;
  columns: DbColumn[];
  db: Map<string, Record<string, unknown>>;
  expected: Map<string, Record<string, unknown>>;
  ignoreExtra?: (key: string, row: Record<string, unknown>) => boolean;
  accept?: (column: string, dbValue: unknown, expected: Record<string, unknown>) => boolean;
  /** Appended to each difference of a key (e.g. that it is still queued for a refetch). */
  note?: (key: string) => string;
}): void {
  const { label, report, key, columns, db, expected } = options;
  const note = options.note ?? (() => '');
  for (const [id, want] of expected) {
    const have = db.get(id);
    if (!have) {
      report.add(`${label} ${id}: upstream, but missing from the database${note(id)}`);
      continue;
    }
    for (const column of columns) {
      if (column.name === key) continue;
      const dbValue = have[column.name];
      if (sameValue(column.type, dbValue, want[column.name])) continue;
      if (options.accept?.(column.name, dbValue, want)) continue;
      report.add(
        `${label} ${id}: column ${column.name} is ${show(dbValue, column.type)} in the database, ${show(want[column.name], column.type)} upstream${note(id)}`,
      );
    }
  }
  for (const [id, row] of db) {
    if (expected.has(id) || options.ignoreExtra?.(id, row)) continue;
    report.add(`${label} ${id}: in the database, but not upstream (deleted there, or never there)${note(id)}`);
  }
}
