import { inferResultType, type ResultType } from './formula/evaluate.ts';
import { referencedFieldIds, renderFormula } from './formula/parse.ts';
import { type Field, fieldById, type Table, tableById, type World } from './model.ts';

/** The metadata API's view of tables and fields (`GET /v0/meta/bases/{base}/tables`). */
export interface FieldJson {
  id: string;
  name: string;
  type: string;
  description?: string;
  options?: Record<string, unknown>;
}

export interface TableJson {
  id: string;
  name: string;
  description?: string;
  primaryFieldId: string;
  fields: FieldJson[];
  views: Array<{ id: string; name: string; type: string }>;
}

const RESULT_OF_TYPE: Record<string, ResultType> = {
  number: 'number',
  percent: 'number',
  currency: 'number',
  rating: 'number',
  duration: 'number',
  autoNumber: 'number',
  count: 'number',
  checkbox: 'checkbox',
  date: 'dateTime',
  dateTime: 'dateTime',
  createdTime: 'dateTime',
  lastModifiedTime: 'dateTime',
  multipleRecordLinks: 'multipleLookupValues',
  multipleSelects: 'multipleLookupValues',
  multipleLookupValues: 'multipleLookupValues',
  multipleCollaborators: 'multipleLookupValues',
  multipleAttachments: 'multipleLookupValues',
};

/** What a formula sees a field as, for inferring a formula's result type. */
export function resultTypeOf(world: World, table: Table, field: Field, depth = 0): ResultType {
  if (depth > 10) return 'singleLineText';
  if ((field.type === 'formula' || field.type === 'rollup') && field.formula) {
    return inferResultType(field.formula.ast, (id) => {
      const ref = fieldById(table, id);
      return ref ? resultTypeOf(world, table, ref, depth + 1) : 'singleLineText';
    });
  }
  return RESULT_OF_TYPE[field.type] ?? 'singleLineText';
}

function lookupTarget(world: World, table: Table, field: Field): { link?: Field; target?: Field; linked?: Table } {
  const link = fieldById(table, String(field.options.recordLinkFieldId));
  const linked = link && link.type === 'multipleRecordLinks' ? tableById(world, String(link.options.linkedTableId)) : undefined;
  const target = linked ? fieldById(linked, String(field.options.fieldIdInLinkedTable)) : undefined;
  return { link, target, linked };
}

export function fieldOptionsJson(world: World, table: Table, field: Field): Record<string, unknown> | undefined {
  const o = field.options;
  const nameOf = (id: string) => fieldById(table, id)?.name;
  switch (field.type) {
    case 'formula': {
      if (!field.formula) return { formula: String(o.formula ?? ''), isValid: false, referencedFieldIds: [], result: null };
      const refs = referencedFieldIds(field.formula);
      const isValid = refs.every((id) => fieldById(table, id) !== undefined);
      return {
        formula: renderFormula(field.formula, nameOf),
        isValid,
        referencedFieldIds: refs,
        result: { type: resultTypeOf(world, table, field) },
      };
    }
    case 'rollup': {
      const { link, target } = lookupTarget(world, table, field);
      return {
        fieldIdInLinkedTable: o.fieldIdInLinkedTable,
        recordLinkFieldId: o.recordLinkFieldId,
        formula: field.formula?.text,
        isValid: Boolean(link && target && field.formula),
        referencedFieldIds: target ? [target.id] : [],
        result: { type: resultTypeOf(world, table, field) },
      };
    }
    case 'multipleLookupValues': {
      const { link, target, linked } = lookupTarget(world, table, field);
      const result = target && linked ? { type: target.type, ...optionsOrEmpty(world, linked, target) } : null;
      return { fieldIdInLinkedTable: o.fieldIdInLinkedTable, isValid: Boolean(link && target), recordLinkFieldId: o.recordLinkFieldId, result };
    }
    case 'count': {
      const link = fieldById(table, String(o.recordLinkFieldId));
      return { isValid: link?.type === 'multipleRecordLinks', recordLinkFieldId: o.recordLinkFieldId };
    }
    case 'createdTime':
      return { result: { type: 'dateTime', options: { dateFormat: o.dateFormat, timeFormat: o.timeFormat, timeZone: o.timeZone } } };
    case 'lastModifiedTime':
      return {
        isValid: true,
        referencedFieldIds: [],
        result: { type: 'dateTime', options: { dateFormat: o.dateFormat, timeFormat: o.timeFormat, timeZone: o.timeZone } },
      };
    case 'multipleRecordLinks': {
      const out: Record<string, unknown> = { linkedTableId: o.linkedTableId, isReversed: false, prefersSingleRecordLink: Boolean(o.prefersSingleRecordLink) };
      if (typeof o.inverseLinkFieldId === 'string') out.inverseLinkFieldId = o.inverseLinkFieldId;
      return out;
    }
    case 'singleSelect':
    case 'multipleSelects':
    case 'externalSyncSource':
      return { choices: structuredClone(o.choices ?? []) };
    case 'autoNumber':
    case 'createdBy':
    case 'lastModifiedBy':
    case 'singleCollaborator':
    case 'multipleCollaborators':
      return undefined;
    default:
      return Object.keys(o).length > 0 ? structuredClone(o) : undefined;
  }
}

function optionsOrEmpty(world: World, table: Table, field: Field): { options?: Record<string, unknown> } {
  const options = fieldOptionsJson(world, table, field);
  return options ? { options } : {};
}

export function fieldJson(world: World, table: Table, field: Field): FieldJson {
  const out: FieldJson = { id: field.id, name: field.name, type: field.type };
  if (field.description) out.description = field.description;
  const options = fieldOptionsJson(world, table, field);
  if (options) out.options = options;
  return out;
}

export function tableJson(world: World, table: Table): TableJson {
  const out: TableJson = { id: table.id, name: table.name, primaryFieldId: table.primaryFieldId, fields: [], views: [] };
  if (table.description) out.description = table.description;
  out.fields = table.fields.map((f) => fieldJson(world, table, f));
  out.views = table.views.map((v) => ({ ...v }));
  return out;
}
