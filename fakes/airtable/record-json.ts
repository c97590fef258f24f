import { type CellReader, iso } from './cells-read.ts';
import { type Field, type Rec, recordMeta, type Table } from './model.ts';

export interface RecordJsonOptions {
  fields?: Field[];
  byFieldId?: boolean;
  cellFormat?: 'json' | 'string';
  commentCount?: boolean;
}

/** `cellFormat=string`: what the grid shows, roughly (Airtable localises dates; the fake does not). */
function asString(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return v ? 'checked' : '';
  if (Array.isArray(v)) return v.map(asString).join(', ');
  const o = v as Record<string, unknown>;
  if (typeof o.filename === 'string') return `${o.filename} (${String(o.url)})`;
  for (const key of ['name', 'label', 'text', 'value', 'specialValue', 'error']) if (typeof o[key] === 'string') return o[key] as string;
  return JSON.stringify(o);
}

/** One record as the REST API answers it; empty cells are left out. */
export function recordJson(reader: CellReader, table: Table, rec: Rec, opts: RecordJsonOptions = {}): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const field of opts.fields ?? table.fields) {
    const v = reader.cell(table, rec, field);
    if (v === undefined) continue;
    const key = opts.byFieldId ? field.id : field.name;
    if (opts.cellFormat === 'string') {
      const s = asString(v);
      if (s !== '') fields[key] = s;
    } else {
      fields[key] = v;
    }
  }
  const out: Record<string, unknown> = { id: rec.id, createdTime: iso(recordMeta(table, rec).created), fields };
  if (opts.commentCount) out.commentCount = 0;
  return out;
}
