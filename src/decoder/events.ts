import type { NewEvent } from '../events/append.ts';
import { type RawValue, type Relation, UNCHANGED } from './pgoutput.ts';
import { jsonFor } from './values.ts';

/** What the decoder knows of a synced table: its collection, key column and converters. */
export interface TableInfo {
  table: string;
  collection: string;
  names: string[];
  keyIndex: number;
  /** Each column's `"name":`, ready to write. */
  labels: string[];
  /** Each column's text → the JSON text of its value. */
  json: Array<(text: string) => string>;
  /** `{"collection":…` up to `"data":`, the part of every event of this table that never changes. */
  head: string;
  /** `,"table_db_name":…`, another. */
  tableName: string;
}

/** Which table is which collection, and by which column its records are known. */
export interface CollectionRules {
  /** The collection of a table; undefined: the table's changes are not events (e.g. `_sync_meta`). */
  collectionOf(table: string): string | undefined;
  /** The record-id column of a table: `id`, or the key of a table without one. */
  keyOf(table: string): string;
}

/** `schema`: the sync's own (its other schemas, and other syncs' ones, are none of its events). */
export function tableInfo(relation: Pick<Relation, 'schema' | 'name' | 'columns'>, rules: CollectionRules, schema = 'public'): TableInfo | undefined {
  if (relation.schema !== schema) return undefined;
  const collection = rules.collectionOf(relation.name);
  if (collection === undefined) return undefined;
  const names = relation.columns.map((c) => c.name);
  const keyIndex = names.indexOf(rules.keyOf(relation.name));
  if (keyIndex < 0) return undefined;
  return {
    table: relation.name,
    collection,
    names,
    keyIndex,
    labels: names.map((name) => `${JSON.stringify(name)}:`),
    json: relation.columns.map((c) => jsonFor(c.typeOid)),
    head: `{"collection":${JSON.stringify(collection)},"created_at":`,
    tableName: `,"table_db_name":${JSON.stringify(relation.name)}`,
  };
}

/** A row change, or a backfill's `read` of a row as it is (docs/events.md). */
export type ChangeKind = 'inserted' | 'updated' | 'deleted' | 'read';

function jsonOf(info: TableInfo, i: number, raw: RawValue | undefined): string {
  if (raw === null || raw === undefined || raw === UNCHANGED) return 'null';
  return info.json[i]!(raw);
}

function rowJson(info: TableInfo, values: RawValue[]): string {
  let out = '{';
  for (let i = 0; i < info.names.length; i++) {
    if (i > 0) out += ',';
    out += info.labels[i]! + jsonOf(info, i, values[i]);
  }
  return `${out}}`;
}

const addChange = (changes: string, label: string, before: string) => `${changes ? `${changes},` : ''}${label}${before}`;

/** `changes` of an ordinary update: the prior JSON of each column whose value changed. */
function changedColumns(info: TableInfo, prior: RawValue[], next: RawValue[]): string {
  let changes = '';
  for (let i = 0; i < info.names.length; i++) {
    if (prior[i] === next[i]) continue;
    const before = jsonOf(info, i, prior[i]);
    // Same value, other text (numeric 13 and 13.0): no change.
    if (before === jsonOf(info, i, next[i])) continue;
    changes = addChange(changes, info.labels[i]!, before);
  }
  return changes;
}

/**
 * `changes` of a row a swap carried from the old table into the new one: compared as JSON
 * column by column over both tables' columns, an absent column counting as null.
 */
function changedAcrossSwap(priorInfo: TableInfo, prior: RawValue[], info: TableInfo, next: RawValue[]): string {
  let changes = '';
  for (let i = 0; i < info.names.length; i++) {
    const j = priorInfo.names.indexOf(info.names[i]!);
    const before = j < 0 ? 'null' : jsonOf(priorInfo, j, prior[j]);
    if (before !== jsonOf(info, i, next[i])) changes = addChange(changes, info.labels[i]!, before);
  }
  for (let j = 0; j < priorInfo.names.length; j++) {
    if (info.names.includes(priorInfo.names[j]!)) continue;
    const before = jsonOf(priorInfo, j, prior[j]);
    if (before !== 'null') changes = addChange(changes, priorInfo.labels[j]!, before);
  }
  return changes;
}

/**
 * The event of one row change, in the documented shape and key order, written straight as
 * JSON text (the decoder's hot path: no object per row). `prior` is the old row (REPLICA
 * IDENTITY FULL). An update that changed no column is no event. When `priorInfo` is given
 * (a swapped-in table), `prior` has that table's columns: a column only the new table has
 * counts as null before (an added column's values are changes), one only the old table has
 * as null after (a removed column's values are changes too, named in `changes` though no
 * longer in `data`), and a retyped column changed where its value as JSON did (docs/events.md).
 */
export function rowEvent(
  kind: ChangeKind,
  info: TableInfo,
  prior: RawValue[] | undefined,
  next: RawValue[] | undefined,
  meta: { eventKey: string; createdAt: Date; createdAtText: string },
  priorInfo: TableInfo = info,
): NewEvent | undefined {
  let data: string;
  let changes = '';
  let recordId: RawValue | undefined;
  if (kind === 'deleted') {
    if (!prior) return undefined;
    data = rowJson(priorInfo, prior);
    recordId = prior[priorInfo.keyIndex];
  } else {
    if (!next) return undefined;
    // An unchanged TOASTed value is not in the new tuple; the old one has it.
    const filled = prior && priorInfo === info && next.includes(UNCHANGED) ? next.map((v, i) => (v === UNCHANGED ? (prior[i] ?? null) : v)) : next;
    data = rowJson(info, filled);
    recordId = filled[info.keyIndex];
    if (kind === 'updated') {
      if (!prior) return undefined;
      changes = priorInfo === info ? changedColumns(info, prior, filled) : changedAcrossSwap(priorInfo, prior, info, filled);
      if (!changes) return undefined;
    }
  }
  if (typeof recordId !== 'string') return undefined;
  const value =
    `${info.head}"${meta.createdAtText}","data":${data},"event":"${kind}","id":${JSON.stringify(recordId)}` +
    `${info.tableName}${kind === 'updated' ? `,"changes":{${changes}}` : ''}}`;
  // The search also flattens `value`: built by concatenation it is a tree of dozens of pieces,
  // which every young-generation GC would copy one by one while the event waits in a batch;
  // flat, it is one string (this halved the decoder's GC time).
  const plain = value.indexOf('\\') < 0;
  return { collection: info.collection, recordId, eventKey: meta.eventKey, createdAt: meta.createdAt, value, plain };
}
