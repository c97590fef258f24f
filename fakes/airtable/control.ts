import { CellReader } from './cells-read.ts';
import { newPending, normalizeCell } from './cells-write.ts';
import { type Core, runWrite } from './core.ts';
import { type GenerateInput, generateTables } from './generator.ts';
import { randomId } from './ids.ts';
import { type BaseModel, type Field, findField, findTable, type Table, type User } from './model.ts';
import { applyPending, createRecord, deleteRecord, updateRecord, type WriteSession } from './record-ops.ts';
import { recordJson } from './record-json.ts';
import { type FieldJson, fieldJson, type TableJson, tableJson } from './schema.ts';
import {
  addField,
  changeFieldType,
  createTable,
  deleteField,
  deleteTable,
  type FieldSpec,
  renameField,
  renameTable,
  updateFieldOptions,
} from './schema-ops.ts';

export interface RecordJson {
  id: string;
  createdTime: string;
  fields: Record<string, unknown>;
}

/**
 * In-process control of one base, for tests that change things "upstream". No HTTP, no rate
 * limit; changes act as the base owner editing in the UI (webhook source "client"). Values are
 * validated like API writes with typecast on, and system fields (aiText, button, sync source,
 * unknown types) may be set too. Invalid input throws.
 */
export interface FakeBase {
  readonly id: string;
  readonly name: string;
  createTable(name: string, fields: FieldSpec[], opts?: { id?: string; description?: string }): TableJson;
  renameTable(table: string, newName: string): void;
  deleteTable(table: string): void;
  addField(table: string, spec: FieldSpec): FieldJson;
  renameField(table: string, field: string, newName: string): void;
  updateFieldOptions(table: string, field: string, options: Record<string, unknown>): FieldJson;
  deleteField(table: string, field: string): void;
  /**
   * Changes a field's type as the UI does (the API cannot): cells convert like a typecast write
   * of their old value, what does not convert is cleared. Not for link fields, nor into links.
   */
  retypeField(table: string, field: string, type: string, options?: Record<string, unknown>): FieldJson;
  createRecords(table: string, fields: Array<Record<string, unknown>>): RecordJson[];
  /** Merges `fields` into the record (like PATCH). */
  updateRecord(table: string, recId: string, fields: Record<string, unknown>): RecordJson;
  deleteRecords(table: string, ids: string[]): void;
  /** Every record as the REST API shows it (fields by name). */
  records(table: string): RecordJson[];
  recordCount(table: string): number;
  /** The table as the metadata API shows it. */
  table(nameOrId: string): TableJson;
  /** Every table of the base, in order, as the metadata API lists them. */
  tables(): TableJson[];
  /** Seeded tables with every field type, links, lookups, rollups, formulas and N rows each. */
  generate(input: GenerateInput): TableJson[];
  /** A collaborator that singleCollaborator / multipleCollaborators cells may name. */
  addCollaborator(user: { id?: string; email: string; name: string }): User;
}

export class FakeBaseControl implements FakeBase {
  constructor(
    private readonly core: Core,
    private readonly model: BaseModel,
  ) {}

  get id(): string {
    return this.model.id;
  }

  get name(): string {
    return this.model.name;
  }

  private write<T>(fn: (s: WriteSession) => T): T {
    return runWrite(this.core, this.model, { source: 'client', userId: this.core.world.ownerId }, fn);
  }

  private tableOf(nameOrId: string): Table {
    const table = findTable(this.model, nameOrId);
    if (!table) throw new Error(`no table ${nameOrId} in base ${this.model.id}`);
    return table;
  }

  private fieldOf(table: Table, nameOrId: string): Field {
    const field = findField(table, nameOrId);
    if (!field) throw new Error(`no field ${nameOrId} in table ${table.name}`);
    return field;
  }

  private json(table: Table, id: string): RecordJson {
    const rec = table.records.get(id);
    if (!rec) throw new Error(`no record ${id} in table ${table.name}`);
    return recordJson(new CellReader(this.core.world), table, rec) as unknown as RecordJson;
  }

  private cells(table: Table, fields: Record<string, unknown>, pending = newPending(), recId?: string): Map<Field, unknown> {
    const out = new Map<Field, unknown>();
    const current = recId ? table.records.get(recId) : undefined;
    for (const [key, value] of Object.entries(fields)) {
      const field = this.fieldOf(table, key);
      out.set(field, normalizeCell(field, value, { world: this.core.world, typecast: true, trusted: true, pending, current }));
    }
    return out;
  }

  createTable(name: string, fields: FieldSpec[], opts: { id?: string; description?: string } = {}): TableJson {
    const table = this.write((s) => createTable(s, { name, fields, id: opts.id, description: opts.description }, { trusted: true }));
    return tableJson(this.core.world, table);
  }

  renameTable(table: string, newName: string): void {
    const t = this.tableOf(table);
    this.write((s) => renameTable(s, t, { name: newName }));
  }

  deleteTable(table: string): void {
    const t = this.tableOf(table);
    this.write((s) => deleteTable(s, t));
  }

  addField(table: string, spec: FieldSpec): FieldJson {
    const t = this.tableOf(table);
    const field = this.write((s) => addField(s, t, spec, { trusted: true }));
    return fieldJson(this.core.world, t, field);
  }

  renameField(table: string, field: string, newName: string): void {
    const t = this.tableOf(table);
    const f = this.fieldOf(t, field);
    this.write((s) => renameField(s, t, f, { name: newName }));
  }

  updateFieldOptions(table: string, field: string, options: Record<string, unknown>): FieldJson {
    const t = this.tableOf(table);
    const f = this.fieldOf(t, field);
    this.write((s) => updateFieldOptions(s, t, f, options));
    return fieldJson(this.core.world, t, f);
  }

  deleteField(table: string, field: string): void {
    const t = this.tableOf(table);
    const f = this.fieldOf(t, field);
    this.write((s) => deleteField(s, t, f));
  }

  retypeField(table: string, field: string, type: string, options?: Record<string, unknown>): FieldJson {
    const t = this.tableOf(table);
    const f = this.fieldOf(t, field);
    this.write((s) => changeFieldType(s, t, f, type, options));
    return fieldJson(this.core.world, t, f);
  }

  createRecords(table: string, fields: Array<Record<string, unknown>>): RecordJson[] {
    const t = this.tableOf(table);
    const pending = newPending();
    const rows = fields.map((f) => this.cells(t, f, pending));
    const ids = this.write((s) => {
      applyPending(s, pending);
      return rows.map((cells) => createRecord(s, t, cells).id);
    });
    return ids.map((id) => this.json(t, id));
  }

  updateRecord(table: string, recId: string, fields: Record<string, unknown>): RecordJson {
    const t = this.tableOf(table);
    const rec = t.records.get(recId);
    if (!rec) throw new Error(`no record ${recId} in table ${t.name}`);
    const pending = newPending();
    const cells = this.cells(t, fields, pending, recId);
    this.write((s) => {
      applyPending(s, pending);
      updateRecord(s, t, rec, cells, false);
    });
    return this.json(t, recId);
  }

  deleteRecords(table: string, ids: string[]): void {
    const t = this.tableOf(table);
    const recs = ids.map((id) => {
      const rec = t.records.get(id);
      if (!rec) throw new Error(`no record ${id} in table ${t.name}`);
      return rec;
    });
    this.write((s) => {
      for (const rec of new Set(recs)) deleteRecord(s, t, rec);
    });
  }

  records(table: string): RecordJson[] {
    const t = this.tableOf(table);
    const reader = new CellReader(this.core.world);
    return [...t.records.values()].map((rec) => recordJson(reader, t, rec) as unknown as RecordJson);
  }

  recordCount(table: string): number {
    return this.tableOf(table).records.size;
  }

  table(nameOrId: string): TableJson {
    return tableJson(this.core.world, this.tableOf(nameOrId));
  }

  tables(): TableJson[] {
    return this.model.tables.map((t) => tableJson(this.core.world, t));
  }

  generate(input: GenerateInput): TableJson[] {
    const tables = this.write((s) => generateTables(s, input));
    return tables.map((t) => tableJson(this.core.world, t));
  }

  addCollaborator(user: { id?: string; email: string; name: string }): User {
    const u: User = { id: user.id ?? randomId('usr'), email: user.email, name: user.name };
    this.core.world.users.set(u.id, u);
    return { ...u };
  }
}
