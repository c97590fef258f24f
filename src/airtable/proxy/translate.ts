import type { TableMapping } from '../schema.ts';
import { refuse } from '../../proxy/errors.ts';

/**
 * `svc-translate: 1`: the request may name tables and columns as the database does; they
 * are mapped to what Airtable knows before forwarding, using the mapping the sync built
 * the tables with. The table in the path becomes its id (unambiguous, nothing to encode);
 * columns become field names in `fields` (a write's object or a listing's array),
 * `fieldsToMergeOn`, `sort[].field`, and the query's `fields[]` and `sort[i][field]`.
 * Names that are no database column are left as they are (they may be upstream names
 * already); `filterByFormula` is not rewritten.
 */
export interface Translation {
  path: string;
  query: string;
  body: Buffer | undefined;
  /** The table's mapping, when the path named a table the sync has built. */
  mapping?: TableMapping;
}

function tableIn(mappings: TableMapping[], segment: string): TableMapping | undefined {
  return mappings.find((m) => m.name === segment) ?? mappings.find((m) => m.tableId === segment) ?? mappings.find((m) => m.upstreamName === segment);
}

function columnNames(mapping: TableMapping): Map<string, string> {
  const out = new Map<string, string>();
  for (const c of mapping.columns) if (c.fieldId !== null) out.set(c.name, c.upstreamName);
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function renameKeys(fields: Record<string, unknown>, names: Map<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) out[names.get(key) ?? key] = value;
  return out;
}

const renameList = (list: unknown[], names: Map<string, string>) => list.map((n) => (typeof n === 'string' ? (names.get(n) ?? n) : n));

function translateBody(body: Record<string, unknown>, names: Map<string, string>): Record<string, unknown> {
  const out = { ...body };
  if (isObject(out.fields)) out.fields = renameKeys(out.fields, names);
  else if (Array.isArray(out.fields)) out.fields = renameList(out.fields, names);
  if (Array.isArray(out.records)) {
    out.records = out.records.map((r) => (isObject(r) && isObject(r.fields) ? { ...r, fields: renameKeys(r.fields, names) } : r));
  }
  if (isObject(out.performUpsert) && Array.isArray(out.performUpsert.fieldsToMergeOn)) {
    out.performUpsert = { ...out.performUpsert, fieldsToMergeOn: renameList(out.performUpsert.fieldsToMergeOn, names) };
  }
  if (Array.isArray(out.sort)) {
    out.sort = out.sort.map((s) => (isObject(s) && typeof s.field === 'string' ? { ...s, field: names.get(s.field) ?? s.field } : s));
  }
  return out;
}

const FIELD_PARAM = /^(fields\[\d*\]|sort\[\d+\]\[field\])$/;

/** Rewrites only the field-naming parameters; every other pair keeps its exact bytes. */
function translateQuery(query: string, names: Map<string, string>): string {
  if (query === '') return query;
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      let key: string;
      let value: string;
      try {
        key = decodeURIComponent(pair.slice(0, eq).replace(/\+/g, ' '));
        value = decodeURIComponent(pair.slice(eq + 1).replace(/\+/g, ' '));
      } catch {
        return pair;
      }
      const upstream = FIELD_PARAM.test(key) ? names.get(value) : undefined;
      return upstream === undefined ? pair : `${pair.slice(0, eq)}=${encodeURIComponent(upstream)}`;
    })
    .join('&');
}

/** Translates a request on `/v0/{base}/{table}[/…]`; other paths pass unchanged. */
export function translateAirtable(
  request: { path: string; query: string; body: Buffer | undefined; contentType: string | undefined },
  mappings: TableMapping[],
): Translation {
  const segments = request.path.split('/');
  // ['', 'v0', base, table, …]
  const tableSegment = segments[3];
  if (segments[1] !== 'v0' || tableSegment === undefined || tableSegment === '' || segments[2] === 'meta' || segments[2] === 'bases') {
    return { path: request.path, query: request.query, body: request.body };
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(tableSegment);
  } catch {
    throw refuse('invalid_request', 'svc-translate: the table name in the path is not valid percent-encoding');
  }
  const mapping = tableIn(mappings, decoded);
  if (!mapping) return { path: request.path, query: request.query, body: request.body };
  const names = columnNames(mapping);
  segments[3] = mapping.tableId;
  let body = request.body;
  if (body && body.length > 0 && /json/i.test(request.contentType ?? 'application/json')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      throw refuse('invalid_request', 'svc-translate: the request body is not valid JSON');
    }
    if (isObject(parsed)) body = Buffer.from(JSON.stringify(translateBody(parsed, names)));
  }
  return { path: segments.join('/'), query: translateQuery(request.query, names), body, mapping };
}
