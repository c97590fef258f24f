import { CellReader, iso } from './cells-read.ts';
import { type BaseModel, type Field, recordMeta, type Rec, type Table, type World } from './model.ts';

/** Who made a change, as webhook payloads report it. */
export interface ChangeSource {
  source: 'publicApi' | 'client';
  userId: string;
}

type Cells = Record<string, unknown>;

export interface RecordChange {
  current: Cells;
  previous: Cells;
  /** Every non-empty cell after the change, for `includeCellValuesInFieldIds`. */
  all: Cells;
}

export interface FieldShape {
  name?: string;
  type?: string;
  options?: unknown;
}

export interface TableChanges {
  createdRecords: Map<string, { createdTime: string; cells: Cells }>;
  changedRecords: Map<string, RecordChange>;
  destroyedRecordIds: string[];
  createdFields: Map<string, FieldShape>;
  changedFields: Map<string, { current: FieldShape; previous: FieldShape }>;
  destroyedFieldIds: string[];
  changedMetadata?: { current: { name: string; description?: string }; previous: { name: string; description?: string } };
}

/** Everything one write transaction changed, ready to turn into webhook payloads. */
export interface ChangeSet {
  baseId: string;
  transactionNumber: number;
  timestamp: number;
  source: ChangeSource;
  tables: Map<string, TableChanges>;
  createdTables: Map<string, { name: string; description?: string; fields: Map<string, FieldShape> }>;
  destroyedTableIds: string[];
}

const emptyTableChanges = (): TableChanges => ({
  createdRecords: new Map(),
  changedRecords: new Map(),
  destroyedRecordIds: [],
  createdFields: new Map(),
  changedFields: new Map(),
  destroyedFieldIds: [],
});

/**
 * Collects one write's changes. Records are snapshotted (every cell, computed ones included)
 * before they or their linked neighbours change, and diffed at commit, so formula, lookup and
 * rollup changes show up like Airtable's. Without live webhooks nothing is snapshotted.
 */
export class Transaction {
  private readonly before = new Map<Table, Map<string, Cells>>();
  private readonly created = new Map<Table, Set<string>>();
  private readonly destroyed = new Map<Table, string[]>();
  private readonly schema = new Map<string, TableChanges>();
  private readonly createdTables = new Map<string, Table>();
  private readonly destroyedTables: string[] = [];
  private readonly reader: CellReader;

  constructor(
    world: World,
    readonly base: BaseModel,
    readonly source: ChangeSource,
    readonly capture: boolean,
  ) {
    this.reader = new CellReader(world);
  }

  get now(): number {
    return this.reader.now;
  }

  private snapshot(table: Table, rec: Rec): Cells {
    const out: Cells = {};
    for (const field of table.fields) {
      const v = this.reader.cell(table, rec, field, 'webhook');
      if (v !== undefined) out[field.id] = v;
    }
    return out;
  }

  /** Call before a record (or anything it looks up) changes. */
  touch(table: Table, rec: Rec): void {
    if (!this.capture) return;
    let byId = this.before.get(table);
    if (!byId) this.before.set(table, (byId = new Map()));
    if (byId.has(rec.id) || this.created.get(table)?.has(rec.id)) return;
    byId.set(rec.id, this.snapshot(table, rec));
  }

  recordCreated(table: Table, rec: Rec): void {
    if (!this.capture) return;
    let ids = this.created.get(table);
    if (!ids) this.created.set(table, (ids = new Set()));
    ids.add(rec.id);
  }

  recordDestroyed(table: Table, recId: string): void {
    if (!this.capture) return;
    if (this.created.get(table)?.delete(recId)) return;
    this.before.get(table)?.delete(recId);
    let ids = this.destroyed.get(table);
    if (!ids) this.destroyed.set(table, (ids = []));
    ids.push(recId);
  }

  private tableChanges(tableId: string): TableChanges {
    let c = this.schema.get(tableId);
    if (!c) this.schema.set(tableId, (c = emptyTableChanges()));
    return c;
  }

  fieldCreated(table: Table, field: Field): void {
    if (this.createdTables.has(table.id)) return;
    this.tableChanges(table.id).createdFields.set(field.id, { name: field.name, type: field.type });
  }

  fieldChanged(table: Table, fieldId: string, current: FieldShape, previous: FieldShape): void {
    if (this.createdTables.has(table.id)) return;
    const changes = this.tableChanges(table.id);
    const earlier = changes.changedFields.get(fieldId);
    changes.changedFields.set(
      fieldId,
      earlier ? { current: { ...earlier.current, ...current }, previous: { ...previous, ...earlier.previous } } : { current, previous },
    );
  }

  fieldDestroyed(table: Table, fieldId: string): void {
    this.tableChanges(table.id).destroyedFieldIds.push(fieldId);
  }

  tableCreated(table: Table): void {
    this.createdTables.set(table.id, table);
  }

  tableRenamed(table: Table, previous: { name: string; description?: string }): void {
    const meta = { name: table.name, ...(table.description ? { description: table.description } : {}) };
    this.tableChanges(table.id).changedMetadata = { current: meta, previous };
  }

  tableDestroyed(table: Table): void {
    this.before.delete(table);
    this.created.delete(table);
    this.destroyed.delete(table);
    this.schema.delete(table.id);
    if (!this.createdTables.delete(table.id)) this.destroyedTables.push(table.id);
  }

  /** Diffs the snapshots and hands back the change set; the base's transaction number moves on. */
  commit(): ChangeSet {
    this.base.transactionNumber++;
    const set: ChangeSet = {
      baseId: this.base.id,
      transactionNumber: this.base.transactionNumber,
      timestamp: this.now,
      source: this.source,
      tables: this.schema,
      createdTables: new Map(),
      destroyedTableIds: this.destroyedTables,
    };
    for (const [id, table] of this.createdTables) {
      const fields = new Map<string, FieldShape>(table.fields.map((f) => [f.id, { name: f.name, type: f.type }]));
      set.createdTables.set(id, { name: table.name, ...(table.description ? { description: table.description } : {}), fields });
    }
    if (!this.capture) return set;
    for (const [table, ids] of this.created) {
      const changes = this.tableFor(set, table);
      for (const id of ids) {
        const rec = table.records.get(id);
        if (rec) changes.createdRecords.set(id, { createdTime: iso(recordMeta(table, rec).created), cells: this.snapshot(table, rec) });
      }
    }
    for (const [table, byId] of this.before) {
      if (!this.base.tables.includes(table)) continue;
      for (const [id, previousCells] of byId) {
        const rec = table.records.get(id);
        if (!rec) continue;
        const after = this.snapshot(table, rec);
        const current: Cells = {};
        const previous: Cells = {};
        for (const fieldId of new Set([...Object.keys(after), ...Object.keys(previousCells)])) {
          if (JSON.stringify(after[fieldId]) === JSON.stringify(previousCells[fieldId])) continue;
          current[fieldId] = after[fieldId] ?? null;
          previous[fieldId] = previousCells[fieldId] ?? null;
        }
        if (Object.keys(current).length > 0) this.tableFor(set, table).changedRecords.set(id, { current, previous, all: after });
      }
    }
    for (const [table, ids] of this.destroyed) {
      if (this.base.tables.includes(table)) this.tableFor(set, table).destroyedRecordIds.push(...ids);
    }
    return set;
  }

  private tableFor(set: ChangeSet, table: Table): TableChanges {
    let c = set.tables.get(table.id);
    if (!c) set.tables.set(table.id, (c = emptyTableChanges()));
    return c;
  }
}
