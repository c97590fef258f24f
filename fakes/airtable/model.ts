import type { CompiledFormula } from './formula/ast.ts';

/** The in-memory state of the fake: bases, tables, fields, records, users. Plain data, no behaviour. */
export interface User {
  id: string;
  email: string;
  name: string;
}

export interface View {
  id: string;
  name: string;
  type: string;
}

export interface Field {
  id: string;
  name: string;
  type: string;
  /** Stored options; what the schema endpoint shows is derived from these (see schema.ts). */
  options: Record<string, unknown>;
  description?: string;
  /** Index into a record's cells array. Slots are never reused, so deleted fields leave holes. */
  slot: number;
  /** formula and rollup fields: parsed text with references by field id. */
  formula?: CompiledFormula;
  /** The value of a generated row, for rows nobody has written yet (keeps a million rows small). */
  gen?: (row: number) => unknown;
}

export interface RecordMeta {
  created: number;
  modified: number;
  autoNumber: number;
  createdBy: string;
  modifiedBy: string;
}

/**
 * One record. Generated rows start with `cells` and `meta` null and read their values from the
 * generator; the first write copies them out ("materialises" the row).
 * Stored cells: select choices and collaborators by id, links as record ids, attachments without url.
 */
export interface Rec {
  id: string;
  row: number;
  cells: unknown[] | null;
  meta: RecordMeta | null;
}

export interface TableGen {
  seed: number;
  salt: number;
  rows: number;
  /** Record id of each generated row, so links can point at rows by index. */
  ids: string[];
  epochMs: number;
  userIds: string[];
}

export interface Table {
  id: string;
  name: string;
  description?: string;
  primaryFieldId: string;
  fields: Field[];
  views: View[];
  /** Insertion order is the default listing order. */
  records: Map<string, Rec>;
  nextSlot: number;
  nextAutoNumber: number;
  gen?: TableGen;
}

export interface BaseModel {
  id: string;
  name: string;
  tables: Table[];
  transactionNumber: number;
}

/** What every part of the fake shares: users, bases, the public url, the clock. */
export interface World {
  users: Map<string, User>;
  bases: Map<string, BaseModel>;
  ownerId: string;
  url: string;
  now(): number;
}

export function findTable(base: BaseModel, nameOrId: string): Table | undefined {
  return base.tables.find((t) => t.id === nameOrId) ?? base.tables.find((t) => t.name === nameOrId);
}

export function findField(table: Table, nameOrId: string): Field | undefined {
  return table.fields.find((f) => f.id === nameOrId) ?? table.fields.find((f) => f.name === nameOrId);
}

export function fieldById(table: Table, id: string): Field | undefined {
  return table.fields.find((f) => f.id === id);
}

export function tableById(world: World, tableId: string): Table | undefined {
  for (const base of world.bases.values()) {
    const t = base.tables.find((x) => x.id === tableId);
    if (t) return t;
  }
  return undefined;
}

export function primaryField(table: Table): Field {
  return (fieldById(table, table.primaryFieldId) ?? table.fields[0]) as Field;
}

const DAY = 86_400_000;

/** createdTime / lastModifiedTime / autoNumber / createdBy, derived for untouched generated rows. */
export function recordMeta(table: Table, rec: Rec): RecordMeta {
  if (rec.meta) return rec.meta;
  const gen = table.gen;
  if (!gen) throw new Error(`record ${rec.id} has no metadata`);
  const created = gen.epochMs + rec.row * 61_000;
  const spread = ((rec.row * 2654435761) >>> 0) % (30 * DAY);
  const users = gen.userIds;
  return {
    created,
    modified: created + spread,
    autoNumber: rec.row + 1,
    createdBy: users[rec.row % users.length] as string,
    modifiedBy: users[(rec.row >> 2) % users.length] as string,
  };
}

export function storedValue(rec: Rec, field: Field): unknown {
  if (rec.cells) return rec.cells[field.slot];
  return field.gen ? field.gen(rec.row) : undefined;
}

/** Copies a generated row's values into its own cells, before its first change. */
export function materialise(table: Table, rec: Rec): unknown[] {
  if (rec.cells) return rec.cells;
  const meta = recordMeta(table, rec);
  const cells: unknown[] = [];
  for (const field of table.fields) if (field.gen) cells[field.slot] = field.gen(rec.row);
  rec.cells = cells;
  rec.meta = { ...meta };
  return cells;
}
