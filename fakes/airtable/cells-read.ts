import { evaluate, formulaCellJson } from './formula/evaluate.ts';
import { FDate, FError, type FValue, flatten, toText } from './formula/values.ts';
import { type Field, fieldById, primaryField, type Rec, recordMeta, storedValue, type Table, tableById, type World } from './model.ts';

/** REST answers use plain values; webhook payloads use Airtable's richer "v2" cell format for some types. */
export type CellFormat = 'rest' | 'webhook';

export interface StoredAttachment {
  id: string;
  filename: string;
  size: number;
  type: string;
  width?: number;
  height?: number;
}

interface Choice {
  id: string;
  name: string;
  color?: string;
}

const HOUR = 3_600_000;
const MAX_DEPTH = 12;

export function choicesOf(field: Field): Choice[] {
  return Array.isArray(field.options.choices) ? (field.options.choices as Choice[]) : [];
}

/**
 * Reads cells as Airtable shows them, computing formula, lookup, rollup, count and the
 * record-metadata fields on the fly. One reader per request, so "now" is one instant.
 */
export class CellReader {
  constructor(
    private readonly world: World,
    readonly now: number = world.now(),
  ) {}

  /** Cell JSON of one field; undefined for an empty cell (Airtable leaves it out). */
  cell(table: Table, rec: Rec, field: Field, format: CellFormat = 'rest', depth = 0): unknown {
    if (depth > MAX_DEPTH) return { error: '#ERROR!' };
    const o = field.options;
    switch (field.type) {
      case 'formula':
        return field.formula ? formulaCellJson(this.formulaOf(table, rec, field, depth)) : undefined;
      case 'rollup':
        return field.formula ? formulaCellJson(this.rollupOf(table, rec, field, depth)) : undefined;
      case 'count': {
        const link = fieldById(table, String(o.recordLinkFieldId));
        return link ? this.linkIds(rec, link).length : undefined;
      }
      case 'multipleLookupValues':
        return this.lookupCell(table, rec, field, format, depth);
      case 'autoNumber':
        return recordMeta(table, rec).autoNumber;
      case 'createdTime':
        return iso(recordMeta(table, rec).created);
      case 'lastModifiedTime':
        return iso(recordMeta(table, rec).modified);
      case 'createdBy':
        return this.user(recordMeta(table, rec).createdBy);
      case 'lastModifiedBy':
        return this.user(recordMeta(table, rec).modifiedBy);
      default:
        return this.storedCell(rec, field, format);
    }
  }

  private storedCell(rec: Rec, field: Field, format: CellFormat): unknown {
    const v = storedValue(rec, field);
    if (v === undefined || v === null || v === '' || v === false) return undefined;
    if (Array.isArray(v) && v.length === 0) return undefined;
    switch (field.type) {
      case 'singleSelect': {
        const choice = choicesOf(field).find((c) => c.id === v);
        if (!choice) return undefined;
        return format === 'webhook' ? { ...choice } : choice.name;
      }
      case 'multipleSelects': {
        const choices = choicesOf(field);
        const picked = (v as string[]).map((id) => choices.find((c) => c.id === id)).filter((c): c is Choice => c !== undefined);
        if (picked.length === 0) return undefined;
        return format === 'webhook' ? picked.map((c) => ({ ...c })) : picked.map((c) => c.name);
      }
      case 'singleCollaborator':
        return this.user(v as string);
      case 'multipleCollaborators': {
        const users = (v as string[]).map((id) => this.user(id)).filter((u) => u !== undefined);
        return users.length === 0 ? undefined : users;
      }
      case 'multipleRecordLinks': {
        const ids = [...(v as string[])];
        if (format === 'rest') return ids;
        const linked = tableById(this.world, String(field.options.linkedTableId));
        return ids.map((id) => {
          const target = linked?.records.get(id);
          return { id, name: target && linked ? toText(this.formulaValue(linked, target, primaryField(linked), 1)) : '' };
        });
      }
      case 'multipleAttachments':
        return (v as StoredAttachment[]).map((a) => this.attachment(a));
      case 'barcode':
      case 'button':
      case 'aiText':
        return typeof v === 'object' ? { ...(v as object) } : v;
      default:
        return typeof v === 'object' ? structuredClone(v) : v;
    }
  }

  user(id: string): { id: string; email: string; name: string } | undefined {
    const u = this.world.users.get(id);
    return u ? { id: u.id, email: u.email, name: u.name } : undefined;
  }

  /** Attachment urls carry an expiry a couple of hours ahead, like Airtable's signed urls: they change over time. */
  attachment(a: StoredAttachment): Record<string, unknown> {
    const expires = (Math.floor(this.now / HOUR) + 3) * HOUR;
    const url = (suffix: string) => `${this.world.url}/attachments/${a.id}${suffix}/${expires}/${encodeURIComponent(a.filename)}`;
    const out: Record<string, unknown> = { id: a.id };
    if (a.width !== undefined) out.width = a.width;
    if (a.height !== undefined) out.height = a.height;
    out.url = url('');
    out.filename = a.filename;
    out.size = a.size;
    out.type = a.type;
    if (a.type.startsWith('image/') && a.width && a.height) {
      const scaled = (h: number) => ({ url: url(`-${h}`), width: Math.round((a.width as number) * (h / (a.height as number))), height: h });
      out.thumbnails = { small: scaled(36), large: scaled(512), full: { url: url('-full'), width: a.width, height: a.height } };
    }
    return out;
  }

  linkIds(rec: Rec, linkField: Field): string[] {
    const v = storedValue(rec, linkField);
    return Array.isArray(v) ? (v as string[]) : [];
  }

  private linkedRecords(table: Table, rec: Rec, linkFieldId: unknown): { linked: Table; recs: Rec[] } | undefined {
    const link = fieldById(table, String(linkFieldId));
    if (link?.type !== 'multipleRecordLinks') return undefined;
    const linked = tableById(this.world, String(link.options.linkedTableId));
    if (!linked) return undefined;
    const recs: Rec[] = [];
    for (const id of this.linkIds(rec, link)) {
      const r = linked.records.get(id);
      if (r) recs.push(r);
    }
    return { linked, recs };
  }

  private lookupCell(table: Table, rec: Rec, field: Field, format: CellFormat, depth: number): unknown {
    const found = this.linkedRecords(table, rec, field.options.recordLinkFieldId);
    if (!found) return undefined;
    const target = fieldById(found.linked, String(field.options.fieldIdInLinkedTable));
    if (!target) return undefined;
    if (format === 'webhook') {
      const valuesByLinkedRecordId: Record<string, unknown[]> = {};
      for (const r of found.recs) {
        const v = this.cell(found.linked, r, target, 'rest', depth + 1);
        valuesByLinkedRecordId[r.id] = v === undefined ? [] : Array.isArray(v) ? v : [v];
      }
      if (found.recs.length === 0) return undefined;
      return { valuesByLinkedRecordId, linkedRecordIds: found.recs.map((r) => r.id) };
    }
    const out: unknown[] = [];
    for (const r of found.recs) {
      const v = this.cell(found.linked, r, target, 'rest', depth + 1);
      if (v === undefined) continue;
      if (Array.isArray(v)) out.push(...v);
      else out.push(v);
    }
    return out.length === 0 ? undefined : out;
  }

  private rollupOf(table: Table, rec: Rec, field: Field, depth: number): FValue {
    const found = this.linkedRecords(table, rec, field.options.recordLinkFieldId);
    if (!found || !field.formula) return new FError();
    const target = fieldById(found.linked, String(field.options.fieldIdInLinkedTable));
    if (!target) return new FError();
    const values = flatten(found.recs.map((r) => this.formulaValue(found.linked, r, target, depth + 1)));
    return evaluate(field.formula.ast, { ...this.context(table, rec), values, field: () => null });
  }

  private formulaOf(table: Table, rec: Rec, field: Field, depth: number): FValue {
    const formula = field.formula;
    if (!formula) return new FError();
    return evaluate(formula.ast, {
      ...this.context(table, rec),
      field: (id) => {
        const ref = fieldById(table, id);
        return ref ? this.formulaValue(table, rec, ref, depth + 1) : new FError();
      },
    });
  }

  private context(table: Table, rec: Rec) {
    const meta = recordMeta(table, rec);
    return { recordId: rec.id, createdTime: meta.created, modifiedTime: meta.modified, now: this.now };
  }

  /** A field's value as formulas see it (names for selects and users, dates as dates, blanks as null). */
  formulaValue(table: Table, rec: Rec, field: Field, depth = 0): FValue {
    if (depth > MAX_DEPTH) return new FError();
    switch (field.type) {
      case 'formula':
        return this.formulaOf(table, rec, field, depth);
      case 'rollup':
        return this.rollupOf(table, rec, field, depth);
      case 'multipleLookupValues': {
        const found = this.linkedRecords(table, rec, field.options.recordLinkFieldId);
        const target = found && fieldById(found.linked, String(field.options.fieldIdInLinkedTable));
        if (!found || !target) return [];
        return flatten(found.recs.map((r) => this.formulaValue(found.linked, r, target, depth + 1)));
      }
      case 'multipleRecordLinks': {
        const linked = tableById(this.world, String(field.options.linkedTableId));
        if (!linked) return [];
        const primary = primaryField(linked);
        return this.linkIds(rec, field).map((id) => {
          const r = linked.records.get(id);
          return r ? toText(this.formulaValue(linked, r, primary, depth + 1)) : '';
        });
      }
      case 'createdTime':
      case 'lastModifiedTime':
      case 'dateTime':
      case 'date': {
        const v = this.cell(table, rec, field, 'rest', depth);
        if (typeof v !== 'string') return null;
        const ms = Date.parse(field.type === 'date' ? `${v}T00:00:00.000Z` : v);
        return Number.isNaN(ms) ? null : new FDate(ms);
      }
      case 'checkbox':
        return storedValue(rec, field) === true;
    }
    const v = this.cell(table, rec, field, 'rest', depth);
    return toFormulaValue(v);
  }
}

/** Plain cell JSON into formula values: objects become their text (name, label, text, value). */
function toFormulaValue(v: unknown): FValue {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (Array.isArray(v)) return v.map(toFormulaValue);
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if ('specialValue' in o) return Number(o.specialValue);
    if ('error' in o) return new FError(String(o.error));
    if (typeof o.filename === 'string') return `${o.filename} (${String(o.url)})`;
    for (const key of ['name', 'label', 'text', 'value']) if (typeof o[key] === 'string') return o[key] as string;
    return JSON.stringify(o);
  }
  return null;
}

export const iso = (ms: number) => new Date(ms).toISOString();
