import { CellReader, choicesOf, type StoredAttachment } from './cells-read.ts';
import { unprocessable } from './errors.ts';
import { CHOICE_COLORS, isApiWritable, isDerived, KNOWN_TYPES, SYSTEM_WRITTEN_TYPES } from './field-types.ts';
import { hashString, RECORD_ID, randomId } from './ids.ts';
import { type Field, primaryField, type Rec, storedValue, type Table, tableById, type World } from './model.ts';

interface Choice {
  id: string;
  name: string;
  color?: string;
}

/** Schema changes a typecast write implies; applied only once the whole request validated. */
export interface PendingChanges {
  choices: Map<Field, Choice[]>;
  /** Linked records typecast creates from a primary-field name: table → name → new record id. */
  linkCreates: Map<Table, Map<string, string>>;
}

export const newPending = (): PendingChanges => ({ choices: new Map(), linkCreates: new Map() });

export interface WriteOptions {
  world: World;
  typecast: boolean;
  /** The control API may set system-written and unknown-type fields; HTTP may not. */
  trusted: boolean;
  pending: PendingChanges;
  /** The record being updated, for attachments kept by id. */
  current?: Rec;
}

const invalid = (field: Field, detail?: string) =>
  unprocessable('INVALID_VALUE_FOR_COLUMN', `Field "${field.name}" cannot accept the provided value${detail ? `: ${detail}` : ''}`);

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

/** Validates one written value and returns its stored form (undefined = empty), or throws a 422. */
export function normalizeCell(field: Field, value: unknown, opts: WriteOptions): unknown {
  if (isDerived(field.type)) {
    throw unprocessable('INVALID_VALUE_FOR_COLUMN', `Field "${field.name}" cannot accept a value because the field is computed`);
  }
  const known = KNOWN_TYPES.has(field.type);
  if (!opts.trusted && (!isApiWritable(field.type) || !known)) {
    throw unprocessable('INVALID_VALUE_FOR_COLUMN', `Field "${field.name}" cannot accept a value because the field is computed`);
  }
  if (value === null || value === undefined) return undefined;
  if (!known || SYSTEM_WRITTEN_TYPES.has(field.type)) return structuredClone(value);
  const { typecast } = opts;

  switch (field.type) {
    case 'singleLineText':
    case 'email':
    case 'url':
    case 'multilineText':
    case 'richText':
    case 'phoneNumber': {
      if (typeof value === 'string') return value === '' ? undefined : value;
      if (typecast && (typeof value === 'number' || typeof value === 'boolean')) return String(value);
      throw invalid(field);
    }
    case 'number':
    case 'percent':
    case 'currency':
    case 'duration':
    case 'rating': {
      let n: number | undefined;
      if (typeof value === 'number') n = value;
      else if (typecast && typeof value === 'string') {
        const cleaned = value.replace(/[,$€£%\s]/g, '');
        n = cleaned === '' ? undefined : Number(cleaned);
        if (cleaned === '') return undefined;
      }
      if (n === undefined || !Number.isFinite(n)) throw invalid(field);
      if (field.type === 'rating') {
        const max = Number(field.options.max ?? 5);
        if (typecast) n = Math.round(n);
        if (!Number.isInteger(n) || n < 0 || n > max) throw invalid(field);
        return n === 0 ? undefined : n;
      }
      return n;
    }
    case 'checkbox': {
      if (typeof value === 'boolean') return value ? true : undefined;
      if (typecast && (typeof value === 'string' || typeof value === 'number')) {
        return ['true', '1', 'yes', 'checked', 'on'].includes(String(value).trim().toLowerCase()) ? true : undefined;
      }
      throw invalid(field);
    }
    case 'date':
    case 'dateTime': {
      if (typeof value !== 'string' && !(typecast && typeof value === 'number')) throw invalid(field);
      if (value === '') return undefined;
      const text = String(value);
      const ms = typeof value === 'number' ? value : DATE_ONLY.test(text) ? Date.parse(`${text}T00:00:00.000Z`) : Date.parse(text);
      if (Number.isNaN(ms)) throw invalid(field);
      const isoText = new Date(ms).toISOString();
      return field.type === 'date' ? isoText.slice(0, 10) : isoText;
    }
    case 'singleSelect': {
      if (typeof value !== 'string') throw invalid(field);
      if (value === '') return undefined;
      return choiceId(field, value, opts);
    }
    case 'multipleSelects': {
      let names: unknown = value;
      if (typecast && typeof value === 'string')
        names = value
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
      if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) throw invalid(field);
      const ids = [...new Set((names as string[]).filter((n) => n !== '').map((n) => choiceId(field, n, opts)))];
      return ids.length === 0 ? undefined : ids;
    }
    case 'singleCollaborator':
      return userId(field, value, opts);
    case 'multipleCollaborators': {
      if (!Array.isArray(value)) throw invalid(field);
      const ids = [...new Set(value.map((v) => userId(field, v, opts)))];
      return ids.length === 0 ? undefined : ids;
    }
    case 'multipleRecordLinks':
      return linkIds(field, value, opts);
    case 'multipleAttachments':
      return attachments(field, value, opts);
    case 'barcode': {
      if (typecast && typeof value === 'string') return { text: value };
      if (typeof value !== 'object' || Array.isArray(value)) throw invalid(field);
      const b = value as Record<string, unknown>;
      if (typeof b.text !== 'string' || (b.type !== undefined && typeof b.type !== 'string')) throw invalid(field);
      return b.type === undefined ? { text: b.text } : { text: b.text, type: b.type };
    }
    default:
      throw invalid(field);
  }
}

function choiceId(field: Field, name: string, opts: WriteOptions): string {
  const existing = choicesOf(field).find((c) => c.name === name);
  if (existing) return existing.id;
  const pending = opts.pending.choices.get(field) ?? [];
  const queued = pending.find((c) => c.name === name);
  if (queued) return queued.id;
  if (!opts.typecast) {
    throw unprocessable('INVALID_MULTIPLE_CHOICE_OPTIONS', `Insufficient permissions to create new select option ""${name}""`);
  }
  const choice = { id: randomId('sel'), name, color: CHOICE_COLORS[(choicesOf(field).length + pending.length) % CHOICE_COLORS.length] as string };
  pending.push(choice);
  opts.pending.choices.set(field, pending);
  return choice.id;
}

function userId(field: Field, value: unknown, opts: WriteOptions): string {
  let key: string | undefined;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    key = typeof o.id === 'string' ? o.id : typeof o.email === 'string' ? o.email : undefined;
  } else if (opts.typecast && typeof value === 'string') {
    key = value;
  }
  if (key === undefined) throw invalid(field);
  for (const u of opts.world.users.values()) {
    if (u.id === key || u.email.toLowerCase() === key.toLowerCase()) return u.id;
  }
  throw unprocessable('INVALID_VALUE_FOR_COLUMN', `Field "${field.name}" cannot accept the provided value: unknown collaborator ${key}`);
}

function linkIds(field: Field, value: unknown, opts: WriteOptions): string[] | undefined {
  let items: unknown = value;
  if (opts.typecast && typeof value === 'string')
    items = value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  if (!Array.isArray(items)) throw invalid(field);
  const linked = tableById(opts.world, String(field.options.linkedTableId));
  if (!linked) throw invalid(field, 'the linked table no longer exists');
  const out: string[] = [];
  for (const item of items) {
    const id =
      typeof item === 'string'
        ? item
        : typeof item === 'object' && item !== null && typeof (item as { id?: unknown }).id === 'string'
          ? (item as { id: string }).id
          : undefined;
    if (id === undefined) throw invalid(field);
    if (linked.records.has(id)) {
      out.push(id);
    } else if (opts.typecast && !RECORD_ID.test(id)) {
      out.push(linkByName(linked, id, opts));
    } else {
      throw unprocessable('ROW_DOES_NOT_EXIST', `Record ID ${id} does not exist in table ${linked.name}`);
    }
  }
  const unique = [...new Set(out)];
  return unique.length === 0 ? undefined : unique;
}

/** Typecast links by primary-field text, creating the linked record when none matches (as Airtable does). */
function linkByName(linked: Table, name: string, opts: WriteOptions): string {
  const queued = opts.pending.linkCreates.get(linked)?.get(name);
  if (queued) return queued;
  const primary = primaryField(linked);
  const reader = new CellReader(opts.world);
  for (const rec of linked.records.values()) {
    const v = reader.cell(linked, rec, primary);
    if (v !== undefined && String(v) === name) return rec.id;
  }
  const id = randomId('rec');
  const byName = opts.pending.linkCreates.get(linked) ?? new Map<string, string>();
  byName.set(name, id);
  opts.pending.linkCreates.set(linked, byName);
  return id;
}

const MIME: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  pdf: 'application/pdf',
  txt: 'text/plain',
  csv: 'text/csv',
  json: 'application/json',
};

function attachments(field: Field, value: unknown, opts: WriteOptions): StoredAttachment[] | undefined {
  if (!Array.isArray(value)) throw invalid(field);
  const current = opts.current ? storedValue(opts.current, field) : undefined;
  const existing = Array.isArray(current) ? (current as StoredAttachment[]) : [];
  const out: StoredAttachment[] = [];
  for (const item of value) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw invalid(field);
    const a = item as Record<string, unknown>;
    if (typeof a.url !== 'string' && typeof a.id === 'string') {
      const kept = existing.find((e) => e.id === a.id);
      if (!kept) throw invalid(field, `attachment ${a.id} is not in this cell`);
      out.push(kept);
      continue;
    }
    if (typeof a.url !== 'string' || !/^https?:\/\//.test(a.url)) throw invalid(field, 'attachments need a url');
    const fromUrl = fileNameOf(a.url);
    if (fromUrl === undefined) throw invalid(field, `invalid attachment url ${a.url}`);
    const filename = typeof a.filename === 'string' && a.filename !== '' ? a.filename : fromUrl;
    const ext = filename.split('.').pop()?.toLowerCase() ?? '';
    const type = MIME[ext] ?? 'application/octet-stream';
    // Airtable downloads the file later; the fake invents a stable size instead.
    const stored: StoredAttachment = { id: randomId('att'), filename, size: 100 + (hashString(a.url) % 100_000), type };
    if (type.startsWith('image/')) Object.assign(stored, { width: 640, height: 480 });
    out.push(stored);
  }
  return out.length === 0 ? undefined : out;
}

function fileNameOf(url: string): string | undefined {
  try {
    const last = new URL(url).pathname.split('/').pop();
    return last ? decodeURIComponent(last) : 'file';
  } catch {
    return undefined;
  }
}
