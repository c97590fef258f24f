import pg from 'pg';

/**
 * One value in a form both sides of a comparison agree on, whatever the path it came by:
 * a row read from PostgreSQL (node-pg's parsing) or a value in an event (JSON). Only
 * representation is normalised (a timestamp as ISO text or a Date, numeric as text or
 * number, jsonb key order); a different value stays different.
 */
export type Canonical = null | boolean | number | string | Canonical[] | { [key: string]: Canonical };

const TIMESTAMPTZ = new Set([1184, 1185]);
const NUMBERS = new Set([20, 21, 23, 26, 700, 701, 1700, 1005, 1007, 1016, 1021, 1022, 1231]);

function sorted(value: unknown): Canonical {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) return value.map(sorted);
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object') {
    const out: { [key: string]: Canonical } = {};
    for (const key of Object.keys(value as object).sort()) out[key] = sorted((value as Record<string, unknown>)[key]);
    return out;
  }
  return value as Canonical;
}

function each(value: unknown, f: (item: unknown) => Canonical): Canonical {
  return Array.isArray(value) ? value.map((v) => each(v, f)) : f(value);
}

/**
 * A column value of type `oid` in canonical form, read from the database or from an event.
 * Only representation is forgiven: node-pg gives numeric and bigint as text, an event gives
 * numbers (and integers past 2^53 as text). A number held as text by an event for a text
 * column, or text for a numeric one, stays different: a retype that changes a row's JSON
 * value is an event of that row (docs/events.md).
 */
export function canonical(oid: number, value: unknown, from: 'db' | 'event' = 'db'): Canonical {
  if (value === null || value === undefined) return null;
  if (TIMESTAMPTZ.has(oid)) {
    return each(value, (v) => {
      if (v === null) return null;
      if (from === 'event' && typeof v !== 'string') return sorted(v);
      const ms = v instanceof Date ? v.getTime() : Date.parse(String(v));
      return Number.isNaN(ms) ? String(v) : new Date(ms).toISOString();
    });
  }
  if (NUMBERS.has(oid)) return each(value, (v) => (v === null ? null : from === 'db' || typeof v === 'number' || isBigInteger(v) ? Number(v) : sorted(v)));
  return sorted(value);
}

/** An integer an event carries as text because a JSON number would round it. */
const isBigInteger = (v: unknown) => typeof v === 'string' && /^-?\d+$/.test(v) && !Number.isSafeInteger(Number(v));

export function same(a: Canonical, b: Canonical): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** node-pg types that keep text where its default parsing would lose or move information. */
const RAW = (text: string) => text;
export const readTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    // date and timestamp without time zone: node-pg makes local Dates of them.
    if (oid === 1082 || oid === 1114 || oid === 1186) return RAW;
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

export interface TableRows {
  /** Column name → type oid. */
  columns: Map<string, number>;
  /** Record id → column → canonical value. */
  rows: Map<string, Map<string, Canonical>>;
}

/** Every row of every table of `schema`, canonical, keyed by the `key` column (default `id`). */
export async function readTables(
  databaseUrl: string,
  options: { schema?: string; keyOf?: (table: string) => string; skip?: (table: string) => boolean } = {},
): Promise<Map<string, TableRows>> {
  const schema = options.schema ?? 'public';
  const client = new pg.Client({ connectionString: databaseUrl, types: readTypes });
  await client.connect();
  try {
    // One snapshot for every table.
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows: tables } = await client.query<{ name: string }>(
      "SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1",
      [schema],
    );
    const out = new Map<string, TableRows>();
    for (const { name } of tables) {
      if (name === '_sync_meta' || options.skip?.(name)) continue;
      const key = options.keyOf?.(name) ?? 'id';
      const result = await client.query({ text: `SELECT * FROM ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(name)}` });
      const columns = new Map(result.fields.map((f) => [f.name, f.dataTypeID]));
      if (!columns.has(key)) continue;
      const rows = new Map<string, Map<string, Canonical>>();
      for (const row of result.rows as Array<Record<string, unknown>>) {
        rows.set(String(row[key]), new Map([...columns].map(([column, oid]) => [column, canonical(oid, row[column])])));
      }
      out.set(name, { columns, rows });
    }
    await client.query('COMMIT');
    return out;
  } finally {
    await client.end();
  }
}
