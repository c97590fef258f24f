import type { CellReader } from './cells-read.ts';
import { invalidRequest, unprocessable } from './errors.ts';
import { type FormulaNode, FormulaSyntaxError } from './formula/ast.ts';
import { evaluate } from './formula/evaluate.ts';
import { compileFormula } from './formula/parse.ts';
import { compare, type FValue, truthy } from './formula/values.ts';
import { randomId } from './ids.ts';
import { type Field, fieldById, findField, type Rec, recordMeta, type Table } from './model.ts';
import { recordJson } from './record-json.ts';

export interface ListParams {
  pageSize: number;
  maxRecords?: number;
  offset?: string;
  fields?: string[];
  filterByFormula?: string;
  sort: Array<{ field: string; direction: 'asc' | 'desc' }>;
  view?: string;
  cellFormat: 'json' | 'string';
  timeZone?: string;
  userLocale?: string;
  returnFieldsByFieldId: boolean;
  recordMetadata: string[];
}

const MAX_PAGE_SIZE = 100;

function intParam(name: string, raw: unknown, max?: number): number {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || (max !== undefined && n > max)) {
    throw invalidRequest(`${name} must be an integer between 1 and ${max ?? 'infinity'}`);
  }
  return n;
}

function boolParam(name: string, raw: unknown): boolean {
  if (raw === true || raw === 'true' || raw === '1') return true;
  if (raw === false || raw === 'false' || raw === '0' || raw === undefined) return false;
  throw invalidRequest(`${name} must be a boolean`);
}

function stringParam(name: string, raw: unknown): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string') throw invalidRequest(`${name} must be a string`);
  return raw;
}

function finish(p: Omit<ListParams, 'cellFormat'> & { cellFormat?: unknown }): ListParams {
  const cellFormat = p.cellFormat ?? 'json';
  if (cellFormat !== 'json' && cellFormat !== 'string') throw invalidRequest('cellFormat must be "json" or "string"');
  if (cellFormat === 'string' && (!p.timeZone || !p.userLocale)) {
    throw invalidRequest('timeZone and userLocale are required when cellFormat is "string"');
  }
  for (const s of p.sort) {
    if (s.direction !== 'asc' && s.direction !== 'desc') throw invalidRequest('sort direction must be "asc" or "desc"');
  }
  for (const m of p.recordMetadata) if (m !== 'commentCount') throw invalidRequest(`unknown recordMetadata ${m}`);
  return { ...p, cellFormat };
}

/** List parameters from a GET query string (`fields[]=`, `sort[0][field]=` …). Unknown keys are ignored. */
export function paramsFromQuery(q: URLSearchParams): ListParams {
  const fields: string[] = [];
  const recordMetadata: string[] = [];
  const sorts = new Map<number, { field?: string; direction?: string }>();
  let sawFields = false;
  for (const [key, value] of q) {
    if (/^fields(\[\d*\])?$/.test(key)) {
      sawFields = true;
      fields.push(value);
    } else if (/^recordMetadata(\[\d*\])?$/.test(key)) {
      recordMetadata.push(value);
    } else {
      const m = /^sort\[(\d+)\]\[(field|direction)\]$/.exec(key);
      if (m) {
        const i = Number(m[1]);
        const entry = sorts.get(i) ?? {};
        entry[m[2] as 'field' | 'direction'] = value;
        sorts.set(i, entry);
      }
    }
  }
  const sort = [...sorts.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([, s]) => {
      if (!s.field) throw invalidRequest('every sort entry needs a field');
      return { field: s.field, direction: (s.direction ?? 'asc') as 'asc' | 'desc' };
    });
  const get = (k: string) => q.get(k) ?? undefined;
  return finish({
    pageSize: get('pageSize') === undefined ? MAX_PAGE_SIZE : intParam('pageSize', get('pageSize'), MAX_PAGE_SIZE),
    maxRecords: get('maxRecords') === undefined ? undefined : intParam('maxRecords', get('maxRecords')),
    offset: get('offset'),
    fields: sawFields ? fields : undefined,
    filterByFormula: get('filterByFormula'),
    sort,
    view: get('view'),
    cellFormat: get('cellFormat'),
    timeZone: get('timeZone'),
    userLocale: get('userLocale'),
    returnFieldsByFieldId: boolParam('returnFieldsByFieldId', get('returnFieldsByFieldId')),
    recordMetadata,
  });
}

/** List parameters from a `listRecords` POST body; timeZone and userLocale may come in the query. */
export function paramsFromBody(body: unknown, q: URLSearchParams): ListParams {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw unprocessable('INVALID_REQUEST_BODY', 'Could not parse request body');
  const b = body as Record<string, unknown>;
  const strings = (name: string, v: unknown): string[] | undefined => {
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw invalidRequest(`${name} must be an array of strings`);
    return v as string[];
  };
  let sort: ListParams['sort'] = [];
  if (b.sort !== undefined) {
    if (!Array.isArray(b.sort)) throw invalidRequest('sort must be an array');
    sort = b.sort.map((s) => {
      if (typeof s !== 'object' || s === null || typeof (s as { field?: unknown }).field !== 'string') throw invalidRequest('every sort entry needs a field');
      const dir = (s as { direction?: unknown }).direction ?? 'asc';
      return { field: (s as { field: string }).field, direction: dir as 'asc' | 'desc' };
    });
  }
  return finish({
    pageSize: b.pageSize === undefined ? MAX_PAGE_SIZE : intParam('pageSize', b.pageSize, MAX_PAGE_SIZE),
    maxRecords: b.maxRecords === undefined ? undefined : intParam('maxRecords', b.maxRecords),
    offset: stringParam('offset', b.offset),
    fields: strings('fields', b.fields),
    filterByFormula: stringParam('filterByFormula', b.filterByFormula),
    sort,
    view: stringParam('view', b.view),
    cellFormat: b.cellFormat,
    timeZone: stringParam('timeZone', b.timeZone) ?? q.get('timeZone') ?? undefined,
    userLocale: stringParam('userLocale', b.userLocale) ?? q.get('userLocale') ?? undefined,
    returnFieldsByFieldId: boolParam('returnFieldsByFieldId', b.returnFieldsByFieldId),
    recordMetadata: strings('recordMetadata', b.recordMetadata) ?? [],
  });
}

interface ListIterator {
  id: string;
  tableId: string;
  /** Record order fixed when the listing started; values are read live. */
  ids: string[];
  /** Positions of the offsets handed out, so a retried page answers the same. */
  positions: Map<string, number>;
  lastUsed: number;
}

const OFFSET = /^(itr[0-9A-Za-z]{14})\/(rec[0-9A-Za-z]{14})$/;

/** Live list iterators (Airtable's `offset`), which expire after a while without use. */
export class IteratorStore {
  private readonly iterators = new Map<string, ListIterator>();

  constructor(private readonly ttlMs: number) {}

  clear(): void {
    this.iterators.clear();
  }

  private sweep(now: number): void {
    for (const [id, it] of this.iterators) if (now - it.lastUsed > this.ttlMs) this.iterators.delete(id);
  }

  start(tableId: string, ids: string[], now: number): ListIterator {
    this.sweep(now);
    const it: ListIterator = { id: randomId('itr'), tableId, ids, positions: new Map(), lastUsed: now };
    this.iterators.set(it.id, it);
    return it;
  }

  resume(offset: string, tableId: string, now: number): { it: ListIterator; index: number } {
    const m = OFFSET.exec(offset);
    if (!m) throw unprocessable('INVALID_OFFSET_VALUE', `The value of offset ${JSON.stringify(offset)} is invalid`);
    this.sweep(now);
    const it = this.iterators.get(m[1] as string);
    if (!it) throw unprocessable('LIST_RECORDS_ITERATOR_NOT_AVAILABLE', 'List records iterator is no longer available; restart the listing');
    const index = it.positions.get(m[2] as string);
    if (it.tableId !== tableId || index === undefined) throw unprocessable('INVALID_OFFSET_VALUE', `The value of offset ${JSON.stringify(offset)} is invalid`);
    it.lastUsed = now;
    return { it, index };
  }

  drop(it: ListIterator): void {
    this.iterators.delete(it.id);
  }
}

function resolveFields(table: Table, names: string[]): Field[] {
  return names.map((name) => {
    const f = findField(table, name);
    if (!f) throw unprocessable('UNKNOWN_FIELD_NAME', `Unknown field name: "${name}"`);
    return f;
  });
}

/**
 * The ids a formula of the form `RECORD_ID()='rec…'` or an `OR` of such names, or null. Such
 * lookups skip evaluating the formula row by row, which on a large table would stall the fake's
 * event loop and make it stamp queued requests together (false 429s in benchmarks).
 */
function recordIdsOf(node: FormulaNode): Set<string> | null {
  if (node.k === 'bin' && node.op === '=') {
    const [call, str] = node.l.k === 'call' ? [node.l, node.r] : [node.r, node.l];
    if (call.k === 'call' && call.fn === 'RECORD_ID' && str.k === 'str') return new Set([str.v]);
    return null;
  }
  if (node.k === 'call' && node.fn === 'OR') {
    const ids = new Set<string>();
    for (const arg of node.args) {
      const one = recordIdsOf(arg);
      if (!one) return null;
      for (const id of one) ids.add(id);
    }
    return ids;
  }
  return null;
}

/** The ids a new listing walks: filtered, sorted, capped. */
function snapshotIds(reader: CellReader, table: Table, params: ListParams): string[] {
  let recs: Rec[] = [...table.records.values()];
  if (params.filterByFormula !== undefined && params.filterByFormula.trim() !== '') {
    let formula;
    try {
      formula = compileFormula(params.filterByFormula, { resolveField: (n) => findField(table, n)?.id });
    } catch (e) {
      if (e instanceof FormulaSyntaxError) {
        throw unprocessable('INVALID_FILTER_BY_FORMULA', `The formula for filtering records is invalid: ${e.message}`);
      }
      throw e;
    }
    const only = recordIdsOf(formula.ast);
    if (only) recs = recs.filter((rec) => only.has(rec.id));
    else
      recs = recs.filter((rec) => {
        const meta = recordMeta(table, rec);
        const value = evaluate(formula.ast, {
          recordId: rec.id,
          createdTime: meta.created,
          modifiedTime: meta.modified,
          now: reader.now,
          field: (id) => {
            const f = fieldById(table, id);
            return f ? reader.formulaValue(table, rec, f) : null;
          },
        });
        return truthy(value);
      });
  }
  if (params.sort.length > 0) {
    const keys = params.sort.map((s) => {
      const f = findField(table, s.field);
      if (!f) throw unprocessable('UNKNOWN_FIELD_NAME', `Unknown field name: "${s.field}"`);
      return { f, desc: s.direction === 'desc' };
    });
    const rows = recs.map((rec) => ({ rec, values: keys.map((k) => reader.formulaValue(table, rec, k.f)) }));
    rows.sort((a, b) => {
      for (let i = 0; i < keys.length; i++) {
        const c = compareForSort(a.values[i] as FValue, b.values[i] as FValue);
        if (c !== 0) return (keys[i] as { desc: boolean }).desc ? -c : c;
      }
      return 0;
    });
    recs = rows.map((r) => r.rec);
  }
  if (params.maxRecords !== undefined) recs = recs.slice(0, params.maxRecords);
  return recs.map((r) => r.id);
}

/** Blanks first, then Airtable's loose comparison. */
function compareForSort(a: FValue, b: FValue): number {
  const blankA = a === null || a === '' || (Array.isArray(a) && a.length === 0);
  const blankB = b === null || b === '' || (Array.isArray(b) && b.length === 0);
  if (blankA || blankB) return blankA === blankB ? 0 : blankA ? -1 : 1;
  const c = compare(a, b);
  return typeof c === 'number' ? c : 0;
}

/** One page of a listing, starting one or resuming it from `offset`. */
export function listPage(reader: CellReader, iterators: IteratorStore, table: Table, params: ListParams): Record<string, unknown> {
  if (params.view !== undefined && !table.views.some((v) => v.id === params.view || v.name === params.view)) {
    throw unprocessable('VIEW_NAME_NOT_FOUND', `Could not find view ${JSON.stringify(params.view)} in table ${table.name}`);
  }
  const fields = params.fields ? resolveFields(table, params.fields) : undefined;
  let it;
  let index = 0;
  if (params.offset !== undefined && params.offset !== '') {
    ({ it, index } = iterators.resume(params.offset, table.id, reader.now));
  } else {
    it = iterators.start(table.id, snapshotIds(reader, table, params), reader.now);
  }
  const records: Record<string, unknown>[] = [];
  const opts = { fields, byFieldId: params.returnFieldsByFieldId, cellFormat: params.cellFormat, commentCount: params.recordMetadata.includes('commentCount') };
  let i = index;
  for (; i < it.ids.length && records.length < params.pageSize; i++) {
    const rec = table.records.get(it.ids[i] as string);
    if (rec) records.push(recordJson(reader, table, rec, opts));
  }
  while (i < it.ids.length && !table.records.has(it.ids[i] as string)) i++;
  const out: Record<string, unknown> = { records };
  if (i < it.ids.length) {
    const nextId = it.ids[i] as string;
    it.positions.set(nextId, i);
    out.offset = `${it.id}/${nextId}`;
  } else if (index === 0 && params.offset === undefined) {
    iterators.drop(it);
  }
  return out;
}
