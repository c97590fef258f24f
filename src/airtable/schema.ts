import type { AirtableSettings } from './settings.ts';
import type { ConverterName } from './cells.ts';
import { assignNames } from './naming.ts';
import type { AirtableField, AirtableTable } from './types.ts';

export type PgType = 'text' | 'text[]' | 'numeric' | 'boolean' | 'date' | 'timestamptz' | 'jsonb';

export interface ColumnMapping {
  /** Upstream field id; null for the two columns every table has (`id`, `created_time`). */
  fieldId: string | null;
  upstreamName: string;
  upstreamType: string;
  name: string;
  type: PgType;
  converter: ConverterName;
}

export interface TableMapping {
  tableId: string;
  upstreamName: string;
  name: string;
  columns: ColumnMapping[];
}

/** Names no upstream table may take: the sync's own table. */
const RESERVED_TABLES = ['_sync_meta'];
/** Every table's own columns; an upstream field that would take one gets `_` appended. */
const RESERVED_COLUMNS = ['id', 'created_time'];

const NUMERIC_RESULTS = new Set(['number', 'currency', 'percent', 'rating', 'duration', 'autoNumber', 'count']);

/** The seed's type table, with the settings that choose between two column types. */
function columnType(field: AirtableField, settings: AirtableSettings): { type: PgType; converter: ConverterName } {
  switch (field.type) {
    case 'singleLineText':
    case 'email':
    case 'url':
    case 'multilineText':
    case 'richText':
    case 'phoneNumber':
    case 'singleSelect':
    case 'externalSyncSource':
    case 'formula':
      return { type: 'text', converter: 'text' };
    case 'number':
    case 'percent':
    case 'currency':
    case 'rating':
    case 'autoNumber':
    case 'count':
      return { type: 'numeric', converter: 'numeric' };
    case 'barcode':
      return { type: 'numeric', converter: 'barcode' };
    case 'duration':
      return { type: 'text', converter: 'duration' };
    case 'checkbox':
      return { type: 'boolean', converter: 'checkbox' };
    case 'date':
      return { type: 'date', converter: 'date' };
    case 'dateTime':
    case 'createdTime':
    case 'lastModifiedTime':
      return { type: 'timestamptz', converter: 'timestamp' };
    case 'multipleAttachments':
      return { type: 'text[]', converter: settings.stable_attachment_links ? 'attachmentLinks' : 'textArray' };
    case 'multipleSelects':
    case 'singleCollaborator':
    case 'multipleCollaborators':
      return { type: 'text[]', converter: 'textArray' };
    case 'createdBy':
    case 'lastModifiedBy':
      return { type: 'text', converter: 'text' };
    case 'button':
      return { type: 'text', converter: 'button' };
    case 'aiText':
      return { type: 'text', converter: 'aiText' };
    case 'multipleRecordLinks': {
      const single = settings.intelligent_cast && field.options?.prefersSingleRecordLink === true;
      return single ? { type: 'text', converter: 'firstLink' } : { type: 'text[]', converter: 'textArray' };
    }
    case 'multipleLookupValues': {
      // A lookup of attachments shows them as its own column of them would.
      const links = settings.stable_attachment_links && (field.options?.result as { type?: string } | undefined)?.type === 'multipleAttachments';
      if (settings.lookup_as === 'text') return { type: 'text', converter: links ? 'joinedAttachmentLinks' : 'joinedText' };
      return { type: 'text[]', converter: links ? 'attachmentLinks' : 'textArray' };
    }
    case 'rollup': {
      const result = (field.options?.result as { type?: string } | undefined)?.type;
      return result && NUMERIC_RESULTS.has(result) ? { type: 'numeric', converter: 'rollupNumber' } : { type: 'text[]', converter: 'textArray' };
    }
    default:
      // A type newer than this code: keep the cell whole rather than stop the sync.
      return { type: 'jsonb', converter: 'json' };
  }
}

/** The database shape of a whole base, with names unique across tables and within each. */
export function mapBase(tables: AirtableTable[], settings: AirtableSettings): TableMapping[] {
  const tableNames = assignNames(tables, { reserved: RESERVED_TABLES, fallbackPrefix: 'table' });
  return tables.map((table) => {
    const fieldNames = assignNames(table.fields, { reserved: RESERVED_COLUMNS, fallbackPrefix: 'field' });
    const columns: ColumnMapping[] = [
      { fieldId: null, upstreamName: 'id', upstreamType: 'recordId', name: 'id', type: 'text', converter: 'text' },
      {
        fieldId: null,
        upstreamName: 'createdTime',
        upstreamType: 'createdTime',
        name: 'created_time',
        type: 'timestamptz',
        converter: 'timestamp',
      },
      ...table.fields.map((field) => ({
        fieldId: field.id,
        upstreamName: field.name,
        upstreamType: field.type,
        name: fieldNames.get(field.id)!,
        ...columnType(field, settings),
      })),
    ];
    return { tableId: table.id, upstreamName: table.name, name: tableNames.get(table.id)!, columns };
  });
}
