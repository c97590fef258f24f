/**
 * The "database equals upstream" invariant for an Airtable sync, checked once traffic has
 * quiesced and the sync has caught up. What the database should hold is derived here, from the
 * base itself and the documented rules (airtable-expected.ts, airtable-names.ts), never from the
 * product's mapping code, so a wrong mapping cannot agree with itself:
 *
 * - Tables: every table of the base is a table of the schema, named by the naming rules, whose
 *   COMMENT names its upstream id; it has exactly the documented columns (`id`, `created_time`,
 *   one per field, each COMMENTed with its field's name and id) with the type table's types;
 *   no table is left for a table the base no longer has.
 * - Records: each table holds exactly the base's records, and in each row every column is the
 *   documented value of its cell, compared up to representation only (see normalize.ts).
 *
 * The settings that choose a type (`lookup_as`, `intelligent_cast`) are the sync's own when the
 * caller passes them, else the documented defaults.
 */
import type pg from 'pg';
import { withClient } from '../../src/db/sql.ts';
import type { FakeBase } from '../../fakes/airtable/index.ts';
import type { Violation } from '../types.ts';
import { DOCUMENTED_DEFAULTS, expectedRow, expectedTables, type ExpectedTable, type TypeSettings } from './airtable-expected.ts';
import { CHECK, compareRows, rowsOf, TableViolations, tablesOf, type DbColumn, type DbTable } from './normalize.ts';

export interface AirtableCheckOptions {
  base: FakeBase;
  /** The sync database (the admin URL: its role reads every table and COMMENT). */
  databaseUrl: string;
  /** Where the synced tables are: `public` (default), or a placed sync's own schema. */
  schema?: string;
  /** The sync's settings as the API shows them (GET /api/syncs/:id); the documented defaults when left out. */
  settings?: Record<string, unknown>;
  /** Differences listed per table before a summary line (default 20). */
  cap?: number;
}

/** COMMENTs of a schema's columns: table → column → comment. */
async function columnComments(db: pg.ClientBase, schema: string): Promise<Map<string, Map<string, string | null>>> {
  const { rows } = await db.query<{ table_name: string; column_name: string; comment: string | null }>(
    `SELECT c.relname AS table_name, a.attname AS column_name, col_description(c.oid, a.attnum) AS comment
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      WHERE n.nspname = $1 AND c.relkind = 'r'`,
    [schema],
  );
  const out = new Map<string, Map<string, string | null>>();
  for (const r of rows) {
    if (!out.has(r.table_name)) out.set(r.table_name, new Map());
    out.get(r.table_name)!.set(r.column_name, r.comment);
  }
  return out;
}

/** The shape of one table: its COMMENT, its columns' names, types and COMMENTs. Returns the columns whose values can be read. */
function checkShape(want: ExpectedTable, have: DbTable, comments: Map<string, string | null>, report: TableViolations, label: string): DbColumn[] {
  const { table } = want;
  if (!have.comment?.includes(table.id) || !have.comment.includes(table.name)) {
    report.add(`${label}: the COMMENT of table ${want.name} is ${JSON.stringify(have.comment)}, which does not name "${table.name}" (${table.id})`);
  }
  const dbColumns = new Map(have.columns.map((c) => [c.name, c]));
  const readable: DbColumn[] = [];
  for (const column of want.columns) {
    const of = column.field ? `field "${column.field.name}" (${column.field.id}, ${column.field.type})` : `column ${column.name}`;
    const found = dbColumns.get(column.name);
    if (!found) {
      report.add(`${label}: table ${want.name} has no column ${column.name} (${column.type}) for ${of}`);
      continue;
    }
    readable.push(found);
    if (found.type !== column.type) report.add(`${label}: column ${want.name}.${column.name} is ${found.type}; the type table makes ${of} ${column.type}`);
    const comment = comments.get(column.name) ?? null;
    if (column.field && (!comment?.includes(column.field.id) || !comment.includes(column.field.name))) {
      report.add(`${label}: the COMMENT of column ${want.name}.${column.name} is ${JSON.stringify(comment)}, which does not name ${of}`);
    }
    // `id` and `created_time` stand for no field, but carry a COMMENT as every column does.
    if (!column.field && !comment) report.add(`${label}: column ${want.name}.${column.name} has no COMMENT`);
  }
  const wanted = new Set(want.columns.map((c) => c.name));
  for (const column of have.columns) {
    if (!wanted.has(column.name)) report.add(`${label}: table ${want.name} has column ${column.name} (${column.type}), which no field of the table makes`);
  }
  // The columns come in order: id, created_time, then the fields as the base lists them.
  const order = (names: string[]) => names.filter((n) => wanted.has(n) && dbColumns.has(n)).join(', ');
  const haveOrder = order(have.columns.map((c) => c.name));
  const wantOrder = order(want.columns.map((c) => c.name));
  if (haveOrder !== wantOrder) report.add(`${label}: the columns of ${want.name} are in the order ${haveOrder}; the base lists them as ${wantOrder}`);
  return readable;
}

/** The settings that choose a type, from the API's view of them; a setting left out has its documented default. */
function typeSettings(given: Record<string, unknown> = {}): TypeSettings {
  const { lookup_as = DOCUMENTED_DEFAULTS.lookup_as, intelligent_cast = DOCUMENTED_DEFAULTS.intelligent_cast } = given;
  if ((lookup_as !== 'text' && lookup_as !== 'text[]') || typeof intelligent_cast !== 'boolean') {
    throw new Error(`airtableMatchesUpstream: settings not as documented: ${JSON.stringify({ lookup_as, intelligent_cast })}`);
  }
  return { lookup_as, intelligent_cast };
}

export async function airtableMatchesUpstream(options: AirtableCheckOptions): Promise<Violation[]> {
  const schema = options.schema ?? 'public';
  const settings = typeSettings(options.settings);
  const out: Violation[] = [];
  const expected = expectedTables(options.base.tables(), settings);

  await withClient(options.databaseUrl, async (db: pg.Client) => {
    const inDb = await tablesOf(db, schema);
    const comments = await columnComments(db, schema);
    for (const want of expected) {
      const label = `table "${want.table.name}" (${want.table.id})`;
      const report = new TableViolations(label, options.cap);
      const records = options.base.records(want.table.id);
      const have = inDb.get(want.name);
      if (!have) {
        const elsewhere = [...inDb.values()].find((t) => t.comment?.includes(want.table.id));
        const note = elsewhere ? `; table ${elsewhere.name} carries its id` : '';
        report.add(`${label}: no table ${schema}.${want.name} in the database (${records.length} records upstream)${note}`);
        report.into(out);
        continue;
      }
      const readable = checkShape(want, have, comments.get(want.name) ?? new Map(), report, label);
      if (!readable.some((c) => c.name === 'id')) {
        report.into(out);
        continue;
      }
      // Read with the database's types, compare with the documented ones: a column of the wrong
      // type is reported above and its values are still compared (true is not 'true').
      const types = new Map(want.columns.map((c) => [c.name, c.type]));
      const rows = await rowsOf(db, schema, want.name, 'id', readable);
      const upstream = new Set(records.map((r) => r.id));
      compareRows({
        // A row the base no longer holds: when its record was made says whether a sweep may
        // still keep it (one made in the minute before a listing began is not deleted by it).
        note: (id) => (upstream.has(id) || rows.get(id)?.created_time == null ? '' : `; its row says created ${String(rows.get(id)!.created_time)}`),
        label: `${want.name} (${want.table.id})`,
        report,
        key: 'id',
        columns: readable.map((c) => ({ name: c.name, type: types.get(c.name)! })),
        db: rows,
        expected: new Map(records.map((r) => [r.id, expectedRow(want, r)])),
      });
      report.into(out);
    }

    // Tables the schema holds for no table of the base (a table deleted upstream must go).
    const names = new Set(expected.map((t) => t.name));
    for (const dbTable of inDb.values()) {
      if (dbTable.name === '_sync_meta' || names.has(dbTable.name)) continue;
      const origin = dbTable.comment ? ` (${dbTable.comment})` : '';
      out.push({ check: CHECK, detail: `table ${schema}.${dbTable.name}${origin}: in the database, but the base has no such table` });
    }
  });
  return out;
}
