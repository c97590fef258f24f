import type { NewEvent } from '../events/append.ts';
import { type RawValue, type Relation, UNCHANGED } from './pgoutput.ts';
import { converterFor } from './values.ts';

/** What the decoder knows of a synced table: its collection, key column and converters. */
export interface TableInfo {
  table: string;
  collection: string;
  names: string[];
  keyIndex: number;
  convert: Array<(text: string) => unknown>;
}

/** Which table is which collection, and by which column its records are known. */
export interface CollectionRules {
  /** The collection of a table; undefined: the table's changes are not events (e.g. `_sync_meta`). */
  collectionOf(table: string): string | undefined;
  /** The record-id column of a table: `id`, or the key of a table without one. */
  keyOf(table: string): string;
}

export function tableInfo(relation: Pick<Relation, 'schema' | 'name' | 'columns'>, rules: CollectionRules): TableInfo | undefined {
  if (relation.schema !== 'public') return undefined;
  const collection = rules.collectionOf(relation.name);
  if (collection === undefined) return undefined;
  const names = relation.columns.map((c) => c.name);
  const keyIndex = names.indexOf(rules.keyOf(relation.name));
  if (keyIndex < 0) return undefined;
  return { table: relation.name, collection, names, keyIndex, convert: relation.columns.map((c) => converterFor(c.typeOid)) };
}

export type ChangeKind = 'inserted' | 'updated' | 'deleted';

function valueOf(info: TableInfo, i: number, raw: RawValue): unknown {
  if (raw === null || raw === UNCHANGED) return null;
  return info.convert[i]!(raw);
}

function rowObject(info: TableInfo, values: RawValue[]): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (let i = 0; i < info.names.length; i++) row[info.names[i]!] = valueOf(info, i, values[i] ?? null);
  return row;
}

/**
 * The event of one row change, in CONTRACT §7's shape and key order. `prior` is the old
 * row (REPLICA IDENTITY FULL). An update that changed no column is no event. When
 * `priorInfo` is given (a swapped-in table), `prior` has that table's columns and only
 * columns present in both are compared.
 */
export function rowEvent(
  kind: ChangeKind,
  info: TableInfo,
  prior: RawValue[] | undefined,
  next: RawValue[] | undefined,
  meta: { eventKey: string; createdAt: Date },
  priorInfo: TableInfo = info,
): NewEvent | undefined {
  let data: Record<string, unknown>;
  let changes: Record<string, unknown> | undefined;
  let recordId: RawValue;
  if (kind === 'deleted') {
    if (!prior) return undefined;
    data = rowObject(priorInfo, prior);
    recordId = prior[priorInfo.keyIndex] ?? null;
  } else {
    if (!next) return undefined;
    // An unchanged TOASTed value is not in the new tuple; the old one has it.
    const filled = prior && priorInfo === info ? next.map((v, i) => (v === UNCHANGED ? (prior[i] ?? null) : v)) : next;
    data = rowObject(info, filled);
    recordId = filled[info.keyIndex] ?? null;
    if (kind === 'updated') {
      if (!prior) return undefined;
      changes = {};
      let changed = 0;
      for (let i = 0; i < info.names.length; i++) {
        const j = priorInfo === info ? i : priorInfo.names.indexOf(info.names[i]!);
        if (j < 0) continue; // a column new in the rebuilt table: a schema change, not a row change
        if (prior[j] === filled[i]) continue;
        const before = valueOf(priorInfo, j, prior[j] ?? null);
        // Same value, other text (numeric 13 and 13.0, or a column whose type changed): no change.
        if (JSON.stringify(before) === JSON.stringify(data[info.names[i]!])) continue;
        changes[info.names[i]!] = before;
        changed++;
      }
      if (changed === 0) return undefined;
    }
  }
  if (typeof recordId !== 'string') return undefined;
  const event: Record<string, unknown> = {
    collection: info.collection,
    created_at: meta.createdAt.toISOString(),
    data,
    event: kind,
    id: recordId,
    table_db_name: info.table,
  };
  if (changes) event.changes = changes;
  return { collection: info.collection, recordId, eventKey: meta.eventKey, createdAt: meta.createdAt, value: JSON.stringify(event) };
}
