/**
 * The "database equals upstream" invariant for an Airtable sync, checked once traffic has
 * quiesced and the sync has caught up:
 *
 * - Tables: every table of the base has a mapping (public_swap._tables) named and typed as the
 *   product's own mapBase() says for the base as it is now, and a table in the database with
 *   exactly the mapping's columns and types; no table is left in the schema for a table the
 *   base no longer has.
 * - Records: each table holds exactly the base's records (a record deleted upstream is absent),
 *   and in each row every column is what the stored mapping's converter makes of the cell
 *   (src/airtable/tables.ts rowOf, the code the sync itself writes with), compared up to
 *   representation only (see normalize.ts).
 *
 * `databaseUrl` must be able to read `public_swap` (the sync database's admin URL, not the
 * read-only reader's: the reader has no USAGE on that schema).
 */
import pg from 'pg';
import { AIRTABLE_DEFAULT_SETTINGS, type AirtableSettings } from '../../src/airtable/settings.ts';
import { withClient } from '../../src/db/sql.ts';
import type { FakeBase, TableJson } from '../../fakes/airtable/index.ts';
import { mapBase, type ColumnMapping, type TableMapping } from '../../src/airtable/schema.ts';
import { rowOf } from '../../src/airtable/tables.ts';
import type { AirtableTable } from '../../src/airtable/types.ts';
import type { Violation } from '../types.ts';
import { CHECK, compareRows, rowsOf, TableViolations, tablesOf, type DbColumn } from './normalize.ts';

export interface AirtableCheckOptions {
  base: FakeBase;
  /** The sync database, as a role that can read `public_swap` (the admin URL). */
  databaseUrl: string;
  /** Where the synced tables are: `public` (default), or a placed sync's own schema. */
  schema?: string;
  /** Differences listed per table before a summary line (default 20). */
  cap?: number;
}

/** The settings that choose a column's type: every combination is a mapping the sync may have built. */
const TYPE_SETTINGS: Array<Pick<AirtableSettings, 'lookup_as' | 'intelligent_cast'>> = [
  { lookup_as: 'text[]', intelligent_cast: true },
  { lookup_as: 'text[]', intelligent_cast: false },
  { lookup_as: 'text', intelligent_cast: true },
  { lookup_as: 'text', intelligent_cast: false },
];

/**
 * Every table of the base as the metadata API shows it: FakeBase.tables() where the fake has it;
 * before that, FakeBase could look a table up by name or id but not list them, and the control
 * object's model was the only list there was (the tables' JSON then comes through `table()`).
 */
function upstreamTables(base: FakeBase): TableJson[] {
  const listing = (base as { tables?: () => TableJson[] }).tables;
  if (typeof listing === 'function') return listing.call(base);
  const model = (base as unknown as { model?: { tables?: Array<{ id: string }> } }).model;
  if (!Array.isArray(model?.tables)) throw new Error("airtableMatchesUpstream: cannot list the base's tables (FakeBase has no tables() here)");
  return model.tables.map((t) => base.table(t.id));
}

/** A listed record keyed by field name (the control API's view) → keyed by field id (the sync's listing). */
function byFieldId(table: TableJson, fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of table.fields) if (Object.hasOwn(fields, field.name)) out[field.id] = fields[field.name];
  return out;
}

const key = (c: Pick<ColumnMapping, 'fieldId' | 'name'>) => c.fieldId ?? `:${c.name}`;

export async function airtableMatchesUpstream(options: AirtableCheckOptions): Promise<Violation[]> {
  const schema = options.schema ?? 'public';
  // The sync's bookkeeping schema: `public_swap` beside `public`; a placed sync's
  // schema `x` is assumed to keep it in `x_swap` (the product has no placed syncs yet).
  const swap = schema === 'public' ? 'public_swap' : `${schema}_swap`;
  const cap = options.cap;
  const out: Violation[] = [];
  const tables = upstreamTables(options.base);
  // Names do not depend on settings; the type of a link or lookup column does.
  const desired = TYPE_SETTINGS.map((s) => new Map(mapBase(tables as AirtableTable[], { ...AIRTABLE_DEFAULT_SETTINGS, ...s }).map((m) => [m.tableId, m])));

  await withClient(options.databaseUrl, async (db: pg.Client) => {
    const { rows: mappingRows } = await db.query<{ upstream_id: string; mapping: TableMapping }>(
      `SELECT upstream_id, mapping FROM ${pg.escapeIdentifier(swap)}._tables WHERE upstream_id NOT LIKE 'stripe:%'`,
    );
    const built = new Map(mappingRows.map((r) => [r.upstream_id, r.mapping]));
    const inDb = await tablesOf(db, schema);
    const liveNames = new Set<string>();

    for (const table of tables) {
      const label = `table "${table.name}" (${table.id})`;
      const report = new TableViolations(label, cap);
      const want = desired[0]!.get(table.id)!;
      const mapping = built.get(table.id);
      const records = options.base.records(table.id);
      if (!mapping) {
        liveNames.add(want.name);
        report.add(`${label}: upstream with ${records.length} records, but the sync has built no table for it (no mapping in ${swap}._tables)`);
        report.into(out);
        continue;
      }
      liveNames.add(mapping.name);

      // The stored mapping against the naming rules and type table applied to the base as it is now.
      if (mapping.name !== want.name) report.add(`${label}: the database table is ${mapping.name}, the naming rules make it ${want.name}`);
      const stored = new Map(mapping.columns.map((c) => [key(c), c]));
      for (const column of want.columns) {
        const have = stored.get(key(column));
        const field = column.fieldId ? `field "${column.upstreamName}" (${column.fieldId}, ${column.upstreamType})` : `column ${column.name}`;
        if (!have) {
          report.add(`${label}: ${field} has no column in the mapping (wanted ${column.name} ${column.type})`);
          continue;
        }
        if (have.name !== column.name) report.add(`${label}: ${field} is column ${have.name}, the naming rules make it ${column.name}`);
        if (have.upstreamName !== column.upstreamName || have.upstreamType !== column.upstreamType) {
          report.add(`${label}: column ${have.name} was built for "${have.upstreamName}" (${have.upstreamType}); upstream it is "${column.upstreamName}" (${column.upstreamType})`);
        }
        const typings = desired.map((d) => d.get(table.id)!.columns.find((c) => key(c) === key(column))!);
        if (!typings.some((t) => t.type === have.type && t.converter === have.converter)) {
          report.add(`${label}: column ${have.name} is ${have.type} (${have.converter}); the type table makes ${column.upstreamType} ${[...new Set(typings.map((t) => `${t.type} (${t.converter})`))].join(' or ')}`);
        }
      }
      const upstreamKeys = new Set(want.columns.map(key));
      for (const column of mapping.columns) {
        if (!upstreamKeys.has(key(column))) report.add(`${label}: column ${column.name} is for field ${column.fieldId} ("${column.upstreamName}"), which the table no longer has`);
      }

      // The database table against the stored mapping.
      const dbTable = inDb.get(mapping.name);
      if (!dbTable) {
        report.add(`${label}: no table ${schema}.${mapping.name} in the database (${records.length} records upstream)`);
        report.into(out);
        continue;
      }
      const dbColumns = new Map(dbTable.columns.map((c) => [c.name, c]));
      const compared: DbColumn[] = [];
      for (const column of mapping.columns) {
        // A column of a field the table no longer has is reported above; its values would only repeat that.
        if (!upstreamKeys.has(key(column))) continue;
        const have = dbColumns.get(column.name);
        if (!have) report.add(`${label}: table ${mapping.name} has no column ${column.name} (${column.type})`);
        else if (have.type !== column.type) report.add(`${label}: column ${mapping.name}.${column.name} is ${have.type} in the database, ${column.type} in the mapping`);
        else compared.push(have);
      }
      const mapped = new Set(mapping.columns.map((c) => c.name));
      for (const column of dbTable.columns) {
        if (!mapped.has(column.name)) report.add(`${label}: table ${mapping.name} has column ${column.name}, which the mapping does not have`);
      }
      if (!dbColumns.has('id')) {
        report.into(out);
        continue;
      }

      // Records, with the mapping's own converters.
      const expected = new Map(records.map((r) => [r.id, rowOf(mapping, { id: r.id, createdTime: r.createdTime, fields: byFieldId(table, r.fields) })]));
      const rows = await rowsOf(db, schema, mapping.name, 'id', compared.some((c) => c.name === 'id') ? compared : [{ name: 'id', type: 'text' }, ...compared]);
      compareRows({ label: `${mapping.name} (${table.id})`, report, key: 'id', columns: compared, db: rows, expected });
      report.into(out);
    }

    // Tables the schema holds for no table of the base (a table deleted upstream must go).
    for (const dbTable of inDb.values()) {
      if (dbTable.name === '_sync_meta' || liveNames.has(dbTable.name)) continue;
      const origin = dbTable.comment ? ` (${dbTable.comment})` : '';
      out.push({ check: CHECK, detail: `table ${schema}.${dbTable.name}${origin}: in the database, but the base has no such table` });
    }
  });
  return out;
}
