/** What an Airtable request is about, read from its method and path (`/v0/…`). */
export interface AirtableRequest {
  /** The base the request counts against (records, schema and webhook paths), when it names one. */
  baseId?: string;
  /** The table segment of a records path, decoded (a name or a tbl… id). */
  table?: string;
  recordId?: string;
  /**
   * `write`: a create, update or delete of records (written through on 2xx);
   * `list`: a records listing (GET, or POST …/listRecords), where translation applies to the query or body;
   * `read`: one record; `other`: metadata, webhooks, whoami.
   */
  kind: 'write' | 'list' | 'read' | 'other';
}

const BASE_ID = /^app[A-Za-z0-9]{14}$/;
const WRITES = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);

function decode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** airtable.js sends `/v0/{base}/{table}/?` (a trailing slash): an empty last segment is dropped. */
export function parseAirtablePath(method: string, path: string): AirtableRequest {
  const s = path.split('/').slice(1);
  if (s.length > 1 && s[s.length - 1] === '') s.pop();
  if (s[0] !== 'v0') return { kind: 'other' };
  const base = (id: string | undefined) => (id !== undefined && BASE_ID.test(id) ? id : undefined);
  if (s[1] === 'meta') return { kind: 'other', ...(s[2] === 'bases' && base(s[3]) ? { baseId: s[3] } : {}) };
  if (s[1] === 'bases') return { kind: 'other', ...(base(s[2]) ? { baseId: s[2] } : {}) };
  const baseId = base(s[1]);
  if (!baseId || s.length < 3) return { kind: 'other', ...(baseId ? { baseId } : {}) };
  const table = decode(s[2]!);
  if (table === undefined || s.length > 4) return { kind: 'other', baseId };
  if (s.length === 3) {
    if (method === 'GET') return { kind: 'list', baseId, table };
    return WRITES.has(method) ? { kind: 'write', baseId, table } : { kind: 'other', baseId, table };
  }
  const last = s[3]!;
  if (last === 'listRecords') return method === 'POST' ? { kind: 'list', baseId, table } : { kind: 'other', baseId, table };
  if (method === 'GET') return { kind: 'read', baseId, table, recordId: last };
  // A single record: update or delete (POST is no write on a record path).
  if (method === 'PATCH' || method === 'PUT' || method === 'DELETE') return { kind: 'write', baseId, table, recordId: last };
  return { kind: 'other', baseId, table };
}
