import { CellReader } from './cells-read.ts';
import { newPending, normalizeCell } from './cells-write.ts';
import { unprocessable } from './errors.ts';
import { CHOICE_COLORS, DEFAULT_OPTIONS, isApiCreatable, KNOWN_TYPES, REQUIRED_OPTIONS, TEXT_TYPES } from './field-types.ts';
import { FormulaSyntaxError } from './formula/ast.ts';
import { compileFormula } from './formula/parse.ts';
import { randomId } from './ids.ts';
import { type Field, fieldById, findTable, type Rec, type Table, tableById } from './model.ts';
import type { WriteSession } from './record-ops.ts';
import { fieldOptionsJson } from './schema.ts';

/** A field as tests and the metadata API describe it. */
export interface FieldSpec {
  name: string;
  type: string;
  options?: Record<string, unknown>;
  description?: string;
  /** Fixed id (the generator uses seeded ids); random `fld…` when omitted. */
  id?: string;
}

export interface SchemaWriteOptions {
  /** The control API: defaults fill missing options, and any type may be created. HTTP is strict. */
  trusted: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkFieldName(table: Table, name: unknown, except?: Field): string {
  if (typeof name !== 'string' || name.trim() === '') throw unprocessable('INVALID_FIELD_NAME', 'Field name must be a non-empty string');
  const clash = table.fields.find((f) => f !== except && f.name.toLowerCase() === name.trim().toLowerCase());
  if (clash) throw unprocessable('DUPLICATE_OR_EMPTY_FIELD_NAME', `Field name "${name}" is already used in table ${table.name}`);
  return name.trim();
}

function normaliseChoices(
  raw: unknown,
  existing: Array<{ id: string; name: string; color?: string }> = [],
): Array<{ id: string; name: string; color?: string }> {
  if (!Array.isArray(raw)) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'choices must be an array');
  const seen = new Set<string>();
  return raw.map((c, i) => {
    if (!isObject(c) || typeof c.name !== 'string' || c.name === '') throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'each choice needs a name');
    if (seen.has(c.name)) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', `duplicate choice "${c.name}"`);
    seen.add(c.name);
    const kept = existing.find((e) => (typeof c.id === 'string' ? e.id === c.id : e.name === c.name));
    const id = kept?.id ?? (typeof c.id === 'string' && /^sel/.test(c.id) ? c.id : randomId('sel'));
    const color = typeof c.color === 'string' ? c.color : (kept?.color ?? (CHOICE_COLORS[i % CHOICE_COLORS.length] as string));
    return { id, name: c.name, color };
  });
}

/** Checks a field spec against the table and returns the stored options (and compiled formula). */
function buildOptions(
  s: WriteSession,
  table: Table,
  type: string,
  raw: unknown,
  opts: SchemaWriteOptions,
  previous?: Field,
): Pick<Field, 'options' | 'formula'> {
  if (raw !== undefined && raw !== null && !isObject(raw)) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'options must be an object');
  const given = isObject(raw) ? raw : {};
  if (!opts.trusted && !previous) {
    const missing = (REQUIRED_OPTIONS[type] ?? []).filter((k) => given[k] === undefined);
    if (missing.length > 0) {
      throw unprocessable('INVALID_FIELD_TYPE_OPTIONS_FOR_CREATE', `Field type ${type} requires options: ${missing.join(', ')}`);
    }
  }
  const options: Record<string, unknown> = { ...structuredClone(DEFAULT_OPTIONS[type] ?? {}), ...(previous?.options ?? {}), ...structuredClone(given) };
  const linkField = (id: unknown): Field => {
    const link = typeof id === 'string' ? fieldById(table, id) : undefined;
    if (link?.type !== 'multipleRecordLinks') throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'recordLinkFieldId must name a link field of this table');
    return link;
  };
  const linkedTarget = (link: Field, id: unknown): Field => {
    const linked = tableById(s.world, String(link.options.linkedTableId));
    const target = linked && typeof id === 'string' ? fieldById(linked, id) : undefined;
    if (!target) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'fieldIdInLinkedTable must name a field of the linked table');
    return target;
  };

  switch (type) {
    case 'singleSelect':
    case 'multipleSelects':
    case 'externalSyncSource':
      options.choices = normaliseChoices(options.choices ?? [], (previous?.options.choices as never) ?? []);
      return { options };
    case 'multipleRecordLinks': {
      if (typeof options.linkedTableId !== 'string' || !s.base.tables.some((t) => t.id === options.linkedTableId)) {
        throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'linkedTableId must name a table of this base');
      }
      options.prefersSingleRecordLink = Boolean(options.prefersSingleRecordLink);
      return { options };
    }
    case 'count':
      linkField(options.recordLinkFieldId);
      return { options: { recordLinkFieldId: options.recordLinkFieldId } };
    case 'multipleLookupValues': {
      linkedTarget(linkField(options.recordLinkFieldId), options.fieldIdInLinkedTable);
      return { options: { recordLinkFieldId: options.recordLinkFieldId, fieldIdInLinkedTable: options.fieldIdInLinkedTable } };
    }
    case 'rollup': {
      linkedTarget(linkField(options.recordLinkFieldId), options.fieldIdInLinkedTable);
      const text =
        typeof options.formula === 'string' ? options.formula : typeof options.function === 'string' ? `${options.function}(values)` : 'ARRAYJOIN(values)';
      const formula = compileOrThrow(text, { resolveField: () => undefined, allowValues: true });
      return { options: { recordLinkFieldId: options.recordLinkFieldId, fieldIdInLinkedTable: options.fieldIdInLinkedTable, formula: text }, formula };
    }
    case 'formula': {
      if (typeof options.formula !== 'string') throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'formula fields need options.formula');
      const formula = compileOrThrow(options.formula, {
        resolveField: (nameOrId) => (fieldById(table, nameOrId) ?? table.fields.find((f) => f.name === nameOrId))?.id,
      });
      if (previous && formula.refs.some((r) => r.fieldId === previous.id))
        throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'a formula cannot reference itself');
      return { options: { formula: options.formula }, formula };
    }
    default:
      return { options };
  }
}

function compileOrThrow(text: string, parse: Parameters<typeof compileFormula>[1]) {
  try {
    return compileFormula(text, parse);
  } catch (e) {
    if (e instanceof FormulaSyntaxError) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', `Invalid formula: ${e.message}`);
    throw e;
  }
}

function newField(s: WriteSession, table: Table, spec: FieldSpec, opts: SchemaWriteOptions): Field {
  if (!isObject(spec)) throw unprocessable('INVALID_REQUEST_UNKNOWN', 'Invalid request: a field must be an object');
  const name = checkFieldName(table, spec.name);
  if (typeof spec.type !== 'string' || spec.type === '') throw unprocessable('INVALID_FIELD_TYPE', 'Field type must be a string');
  if (!opts.trusted && !KNOWN_TYPES.has(spec.type)) throw unprocessable('INVALID_FIELD_TYPE', `Unknown field type ${spec.type}`);
  if (!opts.trusted && !isApiCreatable(spec.type)) {
    throw unprocessable('UNSUPPORTED_FIELD_TYPE_FOR_CREATE', `Creating ${spec.type} fields is not supported`);
  }
  const id = spec.id ?? randomId('fld');
  if (table.fields.some((f) => f.id === id)) throw unprocessable('DUPLICATE_FIELD_ID', `Field id ${id} is taken`);
  const built = buildOptions(s, table, spec.type, spec.options, opts);
  const field: Field = { id, name, type: spec.type, options: built.options, slot: table.nextSlot++ };
  if (built.formula) field.formula = built.formula;
  if (typeof spec.description === 'string' && spec.description !== '') field.description = spec.description;
  return field;
}

function uniqueName(table: Table, wanted: string): string {
  let name = wanted;
  for (let i = 2; table.fields.some((f) => f.name.toLowerCase() === name.toLowerCase()); i++) name = `${wanted} ${i}`;
  return name;
}

/** Adds a field; a link to another table also gets its inverse field there, as in Airtable. */
export function addField(s: WriteSession, table: Table, spec: FieldSpec, opts: SchemaWriteOptions & { inverseId?: string }): Field {
  const field = newField(s, table, spec, opts);
  table.fields.push(field);
  s.tx.fieldCreated(table, field);
  if (field.type === 'multipleRecordLinks' && field.options.linkedTableId !== table.id) {
    const linked = findTable(s.base, String(field.options.linkedTableId)) as Table;
    const inverse: Field = {
      id: opts.inverseId ?? randomId('fld'),
      name: uniqueName(linked, table.name),
      type: 'multipleRecordLinks',
      options: { linkedTableId: table.id, inverseLinkFieldId: field.id, prefersSingleRecordLink: false },
      slot: linked.nextSlot++,
    };
    field.options.inverseLinkFieldId = inverse.id;
    linked.fields.push(inverse);
    s.tx.fieldCreated(linked, inverse);
  }
  return field;
}

export function createTable(s: WriteSession, input: { name: unknown; description?: unknown; fields: unknown; id?: string }, opts: SchemaWriteOptions): Table {
  const base = s.base;
  if (typeof input.name !== 'string' || input.name.trim() === '') throw unprocessable('INVALID_TABLE_NAME', 'Table name must be a non-empty string');
  if (base.tables.some((t) => t.name.toLowerCase() === (input.name as string).trim().toLowerCase())) {
    throw unprocessable('DUPLICATE_TABLE_NAME', `Table name "${input.name}" is already used`);
  }
  if (!Array.isArray(input.fields) || input.fields.length === 0)
    throw unprocessable('INVALID_REQUEST_UNKNOWN', 'Invalid request: a table needs at least one field');
  const table: Table = {
    id: input.id ?? randomId('tbl'),
    name: input.name.trim(),
    primaryFieldId: '',
    fields: [],
    views: [{ id: randomId('viw'), name: 'Grid view', type: 'grid' }],
    records: new Map(),
    nextSlot: 0,
    nextAutoNumber: 1,
  };
  if (typeof input.description === 'string' && input.description !== '') table.description = input.description;
  const primaryType = isObject(input.fields[0]) ? input.fields[0].type : undefined;
  if (!opts.trusted && ['multipleRecordLinks', 'multipleAttachments', 'checkbox', 'multipleCollaborators', 'multipleSelects'].includes(String(primaryType))) {
    throw unprocessable('INVALID_FIELD_TYPE_FOR_PRIMARY', `A ${String(primaryType)} field cannot be the primary field`);
  }
  base.tables.push(table);
  s.tx.tableCreated(table);
  try {
    for (const spec of input.fields) addField(s, table, spec as FieldSpec, opts);
  } catch (e) {
    base.tables.splice(base.tables.indexOf(table), 1);
    // Inverse link fields already added elsewhere go too.
    for (const t of base.tables) t.fields = t.fields.filter((f) => !(f.type === 'multipleRecordLinks' && f.options.linkedTableId === table.id));
    throw e;
  }
  table.primaryFieldId = (table.fields[0] as Field).id;
  return table;
}

export function renameTable(s: WriteSession, table: Table, update: { name?: unknown; description?: unknown }): void {
  const previous = { name: table.name, ...(table.description ? { description: table.description } : {}) };
  if (update.name !== undefined) {
    if (typeof update.name !== 'string' || update.name.trim() === '') throw unprocessable('INVALID_TABLE_NAME', 'Table name must be a non-empty string');
    const clash = s.base.tables.find((t) => t !== table && t.name.toLowerCase() === (update.name as string).trim().toLowerCase());
    if (clash) throw unprocessable('DUPLICATE_TABLE_NAME', `Table name "${update.name}" is already used`);
    table.name = update.name.trim();
  }
  if (typeof update.description === 'string') table.description = update.description;
  s.tx.tableRenamed(table, previous);
}

export function deleteTable(s: WriteSession, table: Table): void {
  const base = s.base;
  if (base.tables.length === 1) throw unprocessable('CANNOT_DELETE_LAST_TABLE', 'A base needs at least one table');
  for (const other of base.tables) {
    if (other === table) continue;
    for (const f of [...other.fields]) {
      if (f.type === 'multipleRecordLinks' && f.options.linkedTableId === table.id) removeField(s, other, f);
    }
  }
  base.tables.splice(base.tables.indexOf(table), 1);
  s.tx.tableDestroyed(table);
}

export function renameField(s: WriteSession, table: Table, field: Field, update: { name?: unknown; description?: unknown }): void {
  const previous: Record<string, unknown> = {};
  const current: Record<string, unknown> = {};
  if (update.name !== undefined) {
    const name = checkFieldName(table, update.name, field);
    previous.name = field.name;
    current.name = name;
    field.name = name;
  }
  if (typeof update.description === 'string') {
    previous.description = field.description ?? '';
    current.description = update.description;
    field.description = update.description;
  }
  if (Object.keys(current).length > 0) s.tx.fieldChanged(table, field.id, current, previous);
}

export function updateFieldOptions(s: WriteSession, table: Table, field: Field, options: Record<string, unknown>): void {
  const previous = fieldOptionsJson(s.world, table, field);
  const built = buildOptions(s, table, field.type, options, { trusted: true }, field);
  if (field.type === 'multipleRecordLinks') {
    // Only the single-record preference can change; the linked table and inverse stay.
    field.options = { ...field.options, prefersSingleRecordLink: Boolean(built.options.prefersSingleRecordLink) };
  } else {
    field.options = built.options;
  }
  if (built.formula) field.formula = built.formula;
  s.tx.fieldChanged(table, field.id, { options: fieldOptionsJson(s.world, table, field) }, { options: previous });
}

function removeField(s: WriteSession, table: Table, field: Field): void {
  table.fields = table.fields.filter((f) => f !== field);
  s.tx.fieldDestroyed(table, field.id);
}

/** Deletes a field; deleting one side of a link deletes the other side too. */
export function deleteField(s: WriteSession, table: Table, field: Field): void {
  if (field.id === table.primaryFieldId) throw unprocessable('CANNOT_DELETE_PRIMARY_FIELD', 'The primary field cannot be deleted');
  removeField(s, table, field);
  if (field.type === 'multipleRecordLinks' && typeof field.options.inverseLinkFieldId === 'string') {
    const linked = tableById(s.world, String(field.options.linkedTableId));
    const inverse = linked && fieldById(linked, field.options.inverseLinkFieldId);
    if (linked && inverse) removeField(s, linked, inverse);
  }
}

/** Types the primary field cannot have (as the create-table check above). */
const NOT_PRIMARY = new Set(['multipleRecordLinks', 'multipleAttachments', 'checkbox', 'multipleCollaborators', 'multipleSelects']);
const SELECT_TYPES = new Set(['singleSelect', 'multipleSelects']);

/** One REST cell as text, the way a converted cell reads (names, labels, file names; errors are empty). */
function cellText(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return v ? 'checked' : undefined;
  if (Array.isArray(v)) {
    const parts = v.map(cellText).filter((t): t is string => t !== undefined && t !== '');
    return parts.length === 0 ? undefined : parts.join(', ');
  }
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if ('error' in o || 'specialValue' in o) return undefined;
    for (const key of ['name', 'text', 'label', 'filename', 'value']) if (typeof o[key] === 'string') return o[key] as string;
  }
  return undefined;
}

/** A cell's REST JSON as the input a typecast write of the new type takes. */
function conversionInput(v: unknown, type: string): unknown {
  if (v === undefined || v === null) return undefined;
  if (TEXT_TYPES.has(type)) {
    const text = cellText(v);
    return type === 'singleLineText' && text !== undefined ? text.replace(/\s*\n\s*/g, ' ').trim() : text;
  }
  switch (type) {
    case 'number':
    case 'percent':
    case 'currency':
    case 'rating':
    case 'duration':
      if (typeof v === 'number') return v;
      if (typeof v === 'boolean') return v ? 1 : undefined;
      return cellText(Array.isArray(v) ? v[0] : v);
    case 'checkbox':
      if (typeof v === 'boolean') return v;
      if (typeof v === 'number') return v !== 0;
      return cellText(v);
    case 'multipleSelects':
      return Array.isArray(v) ? v.map(cellText).filter((t) => t !== undefined) : cellText(v);
    case 'singleSelect':
      return cellText(Array.isArray(v) ? v[0] : v);
    case 'singleCollaborator': {
      const one = Array.isArray(v) ? v[0] : v;
      return typeof one === 'object' && one !== null ? { id: (one as { id?: unknown }).id } : one;
    }
    case 'multipleCollaborators':
      return (Array.isArray(v) ? v : [v]).map((u) => (typeof u === 'object' && u !== null ? { id: (u as { id?: unknown }).id } : u));
    case 'multipleAttachments': {
      const text = cellText(v);
      return text && /^https?:\/\//.test(text) ? [{ url: text }] : undefined;
    }
    case 'barcode':
      return typeof v === 'object' && !Array.isArray(v) && typeof (v as { text?: unknown }).text === 'string' ? v : cellText(v);
    default:
      return cellText(v);
  }
}

/**
 * The UI's "change field type" (the API cannot do it): each cell converts as a typecast write
 * of its old value would, and what does not convert is cleared; a select made from text gets
 * a choice per distinct value. Options start from the new type's defaults (select choices carry
 * over between single and multiple select). Link fields cannot be converted, nor can a field
 * become a link or a computed type other than a formula. Webhooks see one field change (type and
 * options), no record changes.
 */
export function changeFieldType(s: WriteSession, table: Table, field: Field, type: string, options?: Record<string, unknown>): void {
  if (field.type === 'multipleRecordLinks')
    throw unprocessable('UNSUPPORTED_FIELD_TYPE_CONVERSION', `Field "${field.name}" links records; it cannot change type`);
  if (type !== 'formula' && (!isApiCreatable(type) || type === 'multipleRecordLinks')) {
    throw unprocessable('UNSUPPORTED_FIELD_TYPE_CONVERSION', `A field cannot be converted to ${type}`);
  }
  if (field.id === table.primaryFieldId && NOT_PRIMARY.has(type)) {
    throw unprocessable('INVALID_FIELD_TYPE_FOR_PRIMARY', `A ${type} field cannot be the primary field`);
  }
  const given = options ?? (SELECT_TYPES.has(type) && SELECT_TYPES.has(field.type) ? { choices: structuredClone(field.options.choices ?? []) } : undefined);
  const built = buildOptions(s, table, type, given, { trusted: true });
  if (built.formula?.refs.some((r) => r.fieldId === field.id)) throw unprocessable('INVALID_FIELD_TYPE_OPTIONS', 'a formula cannot reference itself');
  const next: Field = { ...field, type, options: built.options };

  // Convert every cell first, so a refused conversion leaves the base as it was.
  const converted = new Map<Rec, unknown>();
  const pending = newPending();
  if (type !== 'formula') {
    const reader = new CellReader(s.world);
    for (const rec of table.records.values()) {
      const input = conversionInput(reader.cell(table, rec, field, 'rest'), type);
      let value: unknown;
      try {
        value = input === undefined ? undefined : normalizeCell(next, input, { world: s.world, typecast: true, trusted: true, pending });
      } catch {
        value = undefined;
      }
      if (value !== undefined) converted.set(rec, value);
    }
  }

  const previous = { type: field.type, options: fieldOptionsJson(s.world, table, field) };
  field.type = type;
  field.options = built.options;
  const added = pending.choices.get(next);
  if (added) field.options = { ...field.options, choices: [...((field.options.choices as unknown[]) ?? []), ...added] };
  if (built.formula) field.formula = built.formula;
  else delete field.formula;
  const generated = new Map<number, unknown>();
  for (const rec of table.records.values()) {
    const value = converted.get(rec);
    if (rec.cells) rec.cells[field.slot] = value;
    else if (value !== undefined) generated.set(rec.row, value);
  }
  if (generated.size > 0) field.gen = (row) => generated.get(row);
  else delete field.gen;
  s.tx.fieldChanged(table, field.id, { type, options: fieldOptionsJson(s.world, table, field) }, previous);
}
