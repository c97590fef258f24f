import { CellReader } from './cells-read.ts';
import { newPending, normalizeCell, type PendingChanges } from './cells-write.ts';
import { type Core, runWrite } from './core.ts';
import { forbidden, notFound, unprocessable } from './errors.ts';
import { isApiWritable, KNOWN_TYPES } from './field-types.ts';
import { listPage, paramsFromBody, paramsFromQuery } from './list-records.ts';
import { type BaseModel, type Field, findField, findTable, type Rec, storedValue, type Table } from './model.ts';
import { applyPending, createRecord, deleteRecord, updateRecord } from './record-ops.ts';
import { recordJson } from './record-json.ts';
import type { Answer, RequestContext } from './request-context.ts';

const MAX_RECORDS_PER_WRITE = 10;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function tableOf(base: BaseModel, nameOrId: string): Table {
  const table = findTable(base, nameOrId);
  if (!table) throw forbidden();
  return table;
}

function recordOf(table: Table, recId: string): Rec {
  const rec = table.records.get(recId);
  if (!rec) throw notFound(`Could not find record ${recId}`);
  return rec;
}

/** Airtable's answer for a batch past 10 records (INVALID_RECORDS, as the real API says). */
function checkBatch(records: unknown, verb: string): unknown[] {
  if (!Array.isArray(records) || records.length === 0) throw unprocessable('INVALID_RECORDS', 'records must be a non-empty array');
  if (records.length > MAX_RECORDS_PER_WRITE) {
    throw unprocessable('INVALID_RECORDS', `A maximum of ${MAX_RECORDS_PER_WRITE} records can be ${verb} per request but you have provided ${records.length}.`);
  }
  return records;
}

function flag(body: Record<string, unknown>, name: string): boolean {
  const v = body[name];
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw unprocessable('INVALID_REQUEST_UNKNOWN', `Invalid request: ${name} must be a boolean`);
  return v;
}

/** Validates a `fields` object into stored values keyed by field; nothing is written yet. */
function cellsOf(core: Core, table: Table, fields: unknown, typecast: boolean, pending: PendingChanges, current?: Rec): Map<Field, unknown> {
  if (fields === undefined) return new Map();
  if (!isObject(fields)) throw unprocessable('INVALID_REQUEST_UNKNOWN', 'Invalid request: fields must be an object');
  const out = new Map<Field, unknown>();
  for (const [key, value] of Object.entries(fields)) {
    const field = findField(table, key);
    if (!field) throw unprocessable('UNKNOWN_FIELD_NAME', `Unknown field name: "${key}"`);
    out.set(field, normalizeCell(field, value, { world: core.world, typecast, trusted: false, pending, current }));
  }
  return out;
}

const clearable = (f: Field) => KNOWN_TYPES.has(f.type) && isApiWritable(f.type);

function answerRecords(core: Core, table: Table, ids: string[], byFieldId: boolean): Record<string, unknown>[] {
  const reader = new CellReader(core.world);
  return ids.map((id) => recordJson(reader, table, table.records.get(id) as Rec, { byFieldId }));
}

export function listRecords(ctx: RequestContext, baseId: string, tableName: string, viaPost: boolean): Answer {
  const { base } = ctx.authorize('data.records:read', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const params = viaPost ? paramsFromBody(ctx.json(), ctx.query) : paramsFromQuery(ctx.query);
  return { status: 200, body: listPage(new CellReader(ctx.core.world), ctx.core.iterators, table, params) };
}

export function getRecord(ctx: RequestContext, baseId: string, tableName: string, recId: string): Answer {
  const { base } = ctx.authorize('data.records:read', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const rec = recordOf(table, recId);
  const byFieldId = ['true', '1'].includes(ctx.query.get('returnFieldsByFieldId') ?? '');
  return { status: 200, body: recordJson(new CellReader(ctx.core.world), table, rec, { byFieldId }) };
}

export function createRecords(ctx: RequestContext, baseId: string, tableName: string): Answer {
  const { base, user } = ctx.authorize('data.records:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const body = ctx.jsonObject();
  const typecast = flag(body, 'typecast');
  const byFieldId = flag(body, 'returnFieldsByFieldId');
  const single = body.records === undefined;
  if (single && !isObject(body.fields)) throw unprocessable('INVALID_REQUEST_MISSING_FIELDS', 'Could not find field "fields" in the request body');
  const items = single ? [body] : checkBatch(body.records, 'created');
  const pending = newPending();
  const rows = items.map((item) => {
    if (!isObject(item) || !isObject(item.fields)) throw unprocessable('INVALID_RECORDS', 'each record must be an object with "fields"');
    return cellsOf(ctx.core, table, item.fields, typecast, pending);
  });
  const ids = runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => {
    applyPending(s, pending);
    return rows.map((cells) => createRecord(s, table, cells).id);
  });
  const records = answerRecords(ctx.core, table, ids, byFieldId);
  return { status: 200, body: single ? records[0] : { records } };
}

interface PlannedUpdate {
  rec?: Rec;
  cells: Map<Field, unknown>;
}

/** Upsert: finds the one record whose merge fields equal the sent values, or plans a create. */
function planUpsert(ctx: RequestContext, table: Table, items: unknown[], mergeOn: unknown, typecast: boolean, pending: PendingChanges): PlannedUpdate[] {
  if (!isObject(mergeOn) || !Array.isArray(mergeOn.fieldsToMergeOn) || mergeOn.fieldsToMergeOn.length < 1 || mergeOn.fieldsToMergeOn.length > 3) {
    throw unprocessable('INVALID_REQUEST_UNKNOWN', 'Invalid request: performUpsert.fieldsToMergeOn must list 1 to 3 fields');
  }
  const mergeFields = mergeOn.fieldsToMergeOn.map((name) => {
    const f = typeof name === 'string' ? findField(table, name) : undefined;
    if (!f) throw unprocessable('UNKNOWN_FIELD_NAME', `Unknown field name: "${String(name)}"`);
    if (!clearable(f)) throw unprocessable('INVALID_REQUEST_UNKNOWN', `Invalid request: cannot merge on computed field "${f.name}"`);
    return f;
  });
  const keyOf = (values: unknown[]) => JSON.stringify(values);
  let index: Map<string, Rec[]> | undefined;
  const seen = new Set<string>();
  return items.map((item) => {
    if (!isObject(item) || !isObject(item.fields)) throw unprocessable('INVALID_RECORDS', 'each record must be an object with "fields"');
    if (typeof item.id === 'string') {
      const rec = recordOf(table, item.id);
      return { rec, cells: cellsOf(ctx.core, table, item.fields, typecast, pending, rec) };
    }
    const cells = cellsOf(ctx.core, table, item.fields, typecast, pending);
    const missing = mergeFields.filter((f) => !cells.has(f));
    if (missing.length > 0)
      throw unprocessable('INVALID_REQUEST_UNKNOWN', `Invalid request: every record must set the merge field "${(missing[0] as Field).name}"`);
    const key = keyOf(mergeFields.map((f) => cells.get(f) ?? null));
    if (seen.has(key)) throw unprocessable('INVALID_RECORDS', 'Two records in one upsert request have the same merge field values');
    seen.add(key);
    if (!index) {
      index = new Map();
      for (const rec of table.records.values()) {
        const k = keyOf(mergeFields.map((f) => storedValue(rec, f) ?? null));
        const list = index.get(k);
        if (list) list.push(rec);
        else index.set(k, [rec]);
      }
    }
    const matches = index.get(key) ?? [];
    if (matches.length > 1) throw unprocessable('INVALID_RECORDS', `${matches.length} records match the merge fields; upsert needs at most one`);
    const rec = matches[0];
    if (rec) return { rec, cells: cellsOf(ctx.core, table, item.fields, typecast, pending, rec) };
    return { cells };
  });
}

export function updateRecords(ctx: RequestContext, baseId: string, tableName: string, replace: boolean): Answer {
  const { base, user } = ctx.authorize('data.records:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const body = ctx.jsonObject();
  const typecast = flag(body, 'typecast');
  const byFieldId = flag(body, 'returnFieldsByFieldId');
  const items = checkBatch(body.records, 'updated');
  const pending = newPending();
  const upsert = body.performUpsert !== undefined && body.performUpsert !== null;
  const plan: PlannedUpdate[] = upsert
    ? planUpsert(ctx, table, items, body.performUpsert, typecast, pending)
    : items.map((item) => {
        if (!isObject(item) || typeof item.id !== 'string' || !isObject(item.fields)) {
          throw unprocessable('INVALID_RECORDS', 'each record needs an "id" and "fields"');
        }
        const rec = recordOf(table, item.id);
        return { rec, cells: cellsOf(ctx.core, table, item.fields, typecast, pending, rec) };
      });
  const created: string[] = [];
  const updated: string[] = [];
  const ids = runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => {
    applyPending(s, pending);
    return plan.map((p) => {
      if (p.rec && table.records.has(p.rec.id)) {
        updateRecord(s, table, p.rec, p.cells, replace, clearable);
        updated.push(p.rec.id);
        return p.rec.id;
      }
      const id = createRecord(s, table, p.cells).id;
      created.push(id);
      return id;
    });
  });
  const out: Record<string, unknown> = { records: answerRecords(ctx.core, table, ids, byFieldId) };
  if (upsert) Object.assign(out, { createdRecords: created, updatedRecords: updated });
  return { status: 200, body: out };
}

export function updateOneRecord(ctx: RequestContext, baseId: string, tableName: string, recId: string, replace: boolean): Answer {
  const { base, user } = ctx.authorize('data.records:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const body = ctx.jsonObject();
  const rec = recordOf(table, recId);
  const typecast = flag(body, 'typecast');
  const byFieldId = flag(body, 'returnFieldsByFieldId');
  const pending = newPending();
  const cells = cellsOf(ctx.core, table, body.fields ?? {}, typecast, pending, rec);
  runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => {
    applyPending(s, pending);
    updateRecord(s, table, rec, cells, replace, clearable);
  });
  return { status: 200, body: answerRecords(ctx.core, table, [rec.id], byFieldId)[0] };
}

export function deleteRecords(ctx: RequestContext, baseId: string, tableName: string): Answer {
  const { base, user } = ctx.authorize('data.records:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const ids = [...ctx.query.entries()].filter(([k]) => /^records(\[\d*\])?$/.test(k)).map(([, v]) => v);
  const recs = checkBatch(ids, 'deleted').map((id) => recordOf(table, id as string));
  runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => {
    for (const rec of new Set(recs)) deleteRecord(s, table, rec);
  });
  return { status: 200, body: { records: recs.map((r) => ({ id: r.id, deleted: true })) } };
}

export function deleteOneRecord(ctx: RequestContext, baseId: string, tableName: string, recId: string): Answer {
  const { base, user } = ctx.authorize('data.records:write', baseId);
  const table = tableOf(base as BaseModel, tableName);
  const rec = recordOf(table, recId);
  runWrite(ctx.core, base as BaseModel, { source: 'publicApi', userId: user.id }, (s) => deleteRecord(s, table, rec));
  return { status: 200, body: { id: rec.id, deleted: true } };
}
