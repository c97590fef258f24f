/**
 * Cell JSON → the value written to PostgreSQL, one converter per kind of column.
 * Converters are named (not closures) so a table's mapping can be stored and compared.
 * Their output goes through jsonb_to_recordset, so: strings, numbers, booleans, arrays
 * of strings, or any JSON for jsonb columns; null for an empty cell.
 */

import type { SyncAttachmentLinks } from '../attachments/links.ts';

/** A column value as JSON for jsonb_to_recordset; jsonb columns take any JSON. */
export type CellValue = unknown;

/** Where a cell is, for the converters whose value names it (attachment links). */
export interface CellPlace {
  tableId: string;
  recordId: string;
  /** The sync's link maker; a mapping with link converters is converted only where the sync's links are known. */
  links: SyncAttachmentLinks | undefined;
}

type Converter = (cell: unknown, place: CellPlace) => CellValue;

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** One item of a multi-valued cell as text: what a person would read in the grid. */
function itemText(item: unknown): string | null {
  if (item === null || item === undefined) return null;
  if (typeof item === 'string') return item;
  if (typeof item === 'number' || typeof item === 'boolean') return String(item);
  if (isObject(item)) {
    // Collaborators read as their email, attachments and buttons as their URL, barcodes as their text.
    for (const key of ['email', 'url', 'text', 'name', 'id']) {
      if (typeof item[key] === 'string') return item[key] as string;
    }
    // A button without a URL has none to show; AI text (looked up) reads as its value, as in its own column.
    if ('label' in item) return null;
    if ('state' in item && 'value' in item) return typeof item.value === 'string' && item.value !== '' ? item.value : null;
    if ('specialValue' in item) return String(item.specialValue);
    if ('error' in item) return String(item.error);
  }
  return JSON.stringify(item);
}

/**
 * Attachments as stable links (the setting `stable_attachment_links`): one per attachment,
 * naming the record the cell is in, whose fresh copy the link's route reads again.
 */
function attachmentLinks(cell: unknown, place: CellPlace): string[] | null {
  if (!Array.isArray(cell)) return null;
  const { links } = place;
  if (!links) throw new Error('attachment links are converted only where the sync’s links are known');
  const out = cell.flatMap((item) =>
    isObject(item) && typeof item.id === 'string' ? [links.link({ tableId: place.tableId, recordId: place.recordId, attachmentId: item.id })] : [],
  );
  return out.length > 0 ? out : null;
}

function textArray(cell: unknown): string[] | null {
  if (cell === null || cell === undefined) return null;
  const items = (Array.isArray(cell) ? cell : [cell]).map(itemText).filter((t): t is string => t !== null);
  return items.length > 0 ? items : null;
}

function text(cell: unknown): string | null {
  if (cell === null || cell === undefined || cell === '') return null;
  if (Array.isArray(cell)) return cell.length > 0 ? JSON.stringify(cell) : null;
  return itemText(cell);
}

function numeric(cell: unknown): number | string | null {
  if (typeof cell === 'number') return Number.isFinite(cell) ? cell : null;
  // numeric takes decimal text; anything else (NaN markers, words) is no number.
  if (typeof cell === 'string' && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(cell.trim())) return cell.trim();
  return null;
}

/**
 * Seconds → "h:mm:ss[.fff]", which both reads well and casts to interval. Counted in whole
 * milliseconds: rounding a fraction alone turned 59.9996 s into "0:00:59." (no digits, no carry).
 */
function duration(cell: unknown): string | null {
  if (typeof cell !== 'number' || !Number.isFinite(cell)) return null;
  const ms = Math.round(Math.abs(cell) * 1000);
  const sign = cell < 0 && ms > 0 ? '-' : '';
  const two = (n: number) => String(n).padStart(2, '0');
  const fraction =
    ms % 1000 === 0
      ? ''
      : `.${String(ms % 1000)
          .padStart(3, '0')
          .replace(/0+$/, '')}`;
  return `${sign}${Math.floor(ms / 3_600_000)}:${two(Math.floor(ms / 60_000) % 60)}:${two(Math.floor(ms / 1000) % 60)}${fraction}`;
}

export const converters = {
  text,
  textArray,
  numeric,
  duration,
  /** Airtable omits an unchecked box: absent means false, never unknown. */
  checkbox: (cell: unknown) => cell === true,
  date: (cell: unknown) => (typeof cell === 'string' && cell !== '' ? cell : null),
  timestamp: (cell: unknown) => (typeof cell === 'string' && cell !== '' ? cell : null),
  barcode: (cell: unknown) => numeric(isObject(cell) ? cell.text : cell),
  /** The button's URL (docs: "the URL"); a button that opens none is NULL, not its label. */
  button: (cell: unknown) => (isObject(cell) ? (typeof cell.url === 'string' ? cell.url : null) : text(cell)),
  aiText: (cell: unknown) => (isObject(cell) ? text(cell.value) : text(cell)),
  /** A single-record link column: the first linked id. */
  firstLink: (cell: unknown) => (Array.isArray(cell) && typeof cell[0] === 'string' ? cell[0] : null),
  /** Lookup as one text: the values joined as the grid shows them. */
  joinedText: (cell: unknown) => textArray(cell)?.join(', ') ?? null,
  attachmentLinks,
  joinedAttachmentLinks: (cell: unknown, place: CellPlace) => attachmentLinks(cell, place)?.join(', ') ?? null,
  rollupNumber: (cell: unknown) => numeric(Array.isArray(cell) ? cell[0] : cell),
  /** Unknown (future) field types: kept whole rather than failing the sync. */
  json: (cell: unknown) => (cell === undefined ? null : cell),
} satisfies Record<string, Converter>;

export type ConverterName = keyof typeof converters;
