import { normalizeCell, type PendingChanges } from './cells-write.ts';
import { fieldJson } from './schema.ts';
import { randomId } from './ids.ts';
import { type BaseModel, type Field, fieldById, materialise, primaryField, type Rec, storedValue, type Table, tableById, type World } from './model.ts';
import type { Transaction } from './transaction.ts';

/** One write in progress: who writes, and where its changes are collected. */
export interface WriteSession {
  world: World;
  base: BaseModel;
  tx: Transaction;
  userId: string;
}

function bump(s: WriteSession, rec: Rec): void {
  if (!rec.meta) return;
  rec.meta.modified = s.tx.now;
  rec.meta.modifiedBy = s.userId;
}

/** Snapshots a record and every record it links to (their lookups may show its values). */
function touchWithNeighbours(s: WriteSession, table: Table, rec: Rec): void {
  if (!s.tx.capture) return;
  s.tx.touch(table, rec);
  for (const field of table.fields) {
    if (field.type !== 'multipleRecordLinks') continue;
    const linked = tableById(s.world, String(field.options.linkedTableId));
    const ids = storedValue(rec, field);
    if (!linked || !Array.isArray(ids)) continue;
    for (const id of ids as string[]) {
      const other = linked.records.get(id);
      if (other) s.tx.touch(linked, other);
    }
  }
}

/** Adds or removes `recId` in the inverse link cell of `target`, keeping both sides of a link in step. */
function editInverse(s: WriteSession, linked: Table, inverse: Field, target: Rec, recId: string, add: boolean): void {
  s.tx.touch(linked, target);
  const cells = materialise(linked, target);
  const current = Array.isArray(cells[inverse.slot]) ? (cells[inverse.slot] as string[]) : [];
  const has = current.includes(recId);
  if (add === has) return;
  const next = add ? [...current, recId] : current.filter((id) => id !== recId);
  cells[inverse.slot] = next.length === 0 ? undefined : next;
  bump(s, target);
}

function setCell(s: WriteSession, table: Table, rec: Rec, field: Field, value: unknown): void {
  const cells = materialise(table, rec);
  if (field.type === 'multipleRecordLinks') {
    const before = Array.isArray(cells[field.slot]) ? (cells[field.slot] as string[]) : [];
    const after = Array.isArray(value) ? (value as string[]) : [];
    const linked = tableById(s.world, String(field.options.linkedTableId));
    const inverse = linked && typeof field.options.inverseLinkFieldId === 'string' ? fieldById(linked, field.options.inverseLinkFieldId) : undefined;
    if (linked && inverse) {
      for (const id of before) {
        const target = linked.records.get(id);
        if (target && !after.includes(id)) editInverse(s, linked, inverse, target, rec.id, false);
      }
      for (const id of after) {
        const target = linked.records.get(id);
        if (target && !before.includes(id)) editInverse(s, linked, inverse, target, rec.id, true);
      }
    }
  }
  cells[field.slot] = value;
}

export function createRecord(s: WriteSession, table: Table, values: Map<Field, unknown>, id?: string): Rec {
  let recId = id ?? randomId('rec');
  while (table.records.has(recId)) recId = randomId('rec');
  const now = s.tx.now;
  const rec: Rec = {
    id: recId,
    row: -1,
    cells: [],
    meta: { created: now, modified: now, autoNumber: table.nextAutoNumber++, createdBy: s.userId, modifiedBy: s.userId },
  };
  table.records.set(recId, rec);
  s.tx.recordCreated(table, rec);
  for (const [field, value] of values) if (value !== undefined) setCell(s, table, rec, field, value);
  return rec;
}

/** Writes cells; `replace` (PUT) clears every writable field that was not sent. Every write moves lastModifiedTime. */
export function updateRecord(s: WriteSession, table: Table, rec: Rec, values: Map<Field, unknown>, replace: boolean, clearable?: (f: Field) => boolean): void {
  touchWithNeighbours(s, table, rec);
  materialise(table, rec);
  for (const [field, value] of values) setCell(s, table, rec, field, value);
  if (replace) {
    for (const field of table.fields) {
      if (!values.has(field) && clearable?.(field) && storedValue(rec, field) !== undefined) setCell(s, table, rec, field, undefined);
    }
  }
  bump(s, rec);
}

export function deleteRecord(s: WriteSession, table: Table, rec: Rec): void {
  touchWithNeighbours(s, table, rec);
  for (const field of table.fields) {
    if (field.type !== 'multipleRecordLinks') continue;
    const linked = tableById(s.world, String(field.options.linkedTableId));
    if (!linked) continue;
    const inverse = typeof field.options.inverseLinkFieldId === 'string' ? fieldById(linked, field.options.inverseLinkFieldId) : undefined;
    if (inverse) {
      const ids = storedValue(rec, field);
      for (const id of Array.isArray(ids) ? (ids as string[]) : []) {
        const target = linked.records.get(id);
        if (target) editInverse(s, linked, inverse, target, rec.id, false);
      }
    } else if (linked === table) {
      // A link to its own table has no inverse field: find the records pointing here by scanning.
      for (const other of table.records.values()) {
        if (other === rec) continue;
        const ids = storedValue(other, field);
        if (Array.isArray(ids) && (ids as string[]).includes(rec.id)) {
          s.tx.touch(table, other);
          const cells = materialise(table, other);
          const next = (ids as string[]).filter((id) => id !== rec.id);
          cells[field.slot] = next.length === 0 ? undefined : next;
          bump(s, other);
        }
      }
    }
  }
  table.records.delete(rec.id);
  s.tx.recordDestroyed(table, rec.id);
}

/** Applies what typecast asked for (new select options, linked records named by text) before the cells are set. */
export function applyPending(s: WriteSession, pending: PendingChanges): void {
  for (const [field, choices] of pending.choices) {
    const table = s.base.tables.find((t) => t.fields.includes(field));
    if (!table) continue;
    const previous = fieldJson(s.world, table, field).options;
    field.options = { ...field.options, choices: [...((field.options.choices as unknown[]) ?? []), ...choices] };
    s.tx.fieldChanged(table, field.id, { options: fieldJson(s.world, table, field).options }, { options: previous });
  }
  for (const [table, byName] of pending.linkCreates) {
    const primary = primaryField(table);
    for (const [name, id] of byName) {
      let value: unknown;
      try {
        value = normalizeCell(primary, name, { world: s.world, typecast: true, trusted: true, pending: { choices: new Map(), linkCreates: new Map() } });
      } catch {
        value = undefined;
      }
      createRecord(s, table, new Map([[primary, value]]), id);
    }
  }
}
