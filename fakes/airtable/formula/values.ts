/** Values inside the formula evaluator, and how Airtable coerces between them. */
export class FDate {
  constructor(readonly ms: number) {}
}
export class FError {
  constructor(readonly code: string = '#ERROR!') {}
}
export type FValue = number | string | boolean | null | FDate | FError | FValue[];

export const isError = (v: FValue): v is FError => v instanceof FError;

export function firstError(values: FValue[]): FError | undefined {
  for (const v of values) if (v instanceof FError) return v;
  return undefined;
}

/** Number context: blank is 0, booleans are 1/0, a numeric string is its number. */
export function toNumber(v: FValue): number | FError {
  if (v === null) return 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v instanceof FError) return v;
  if (v instanceof FDate) return v.ms;
  if (Array.isArray(v)) {
    if (v.length === 0) return 0;
    if (v.length === 1) return toNumber(v[0] as FValue);
    return new FError();
  }
  const trimmed = v.trim();
  if (trimmed === '') return 0;
  const n = Number(trimmed);
  return Number.isNaN(n) ? new FError() : n;
}

export function formatNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? 'Infinity' : '-Infinity';
  return String(n);
}

/** Text context: blank is "", arrays join with ", ", dates are ISO strings. */
export function toText(v: FValue): string {
  if (v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return formatNumber(v);
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (v instanceof FDate) return new Date(v.ms).toISOString();
  if (v instanceof FError) return v.code;
  return v
    .map(toText)
    .filter((s) => s !== '')
    .join(', ');
}

export function truthy(v: FValue): boolean {
  if (v === null || v instanceof FError) return false;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0 && !Number.isNaN(v);
  if (typeof v === 'string') return v !== '';
  if (v instanceof FDate) return true;
  return v.length > 0;
}

export function isBlank(v: FValue): boolean {
  return v === null || v === '' || (Array.isArray(v) && v.length === 0) || v === false;
}

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

/** Parses what Airtable's date functions accept: ISO strings, dates, numbers are ms. */
export function toDate(v: FValue): FDate | FError | null {
  if (v === null || v === '') return null;
  if (v instanceof FDate || v instanceof FError) return v;
  if (typeof v === 'number') return new FDate(v);
  if (Array.isArray(v)) return v.length === 1 ? toDate(v[0] as FValue) : new FError();
  if (typeof v === 'boolean') return new FError();
  const text = v.trim();
  const ms = DATE_ONLY.test(text) ? Date.parse(`${text}T00:00:00.000Z`) : Date.parse(text);
  return Number.isNaN(ms) ? new FError() : new FDate(ms);
}

/** Comparison with Airtable's loose typing: blanks, dates, numbers, then text. */
export function compare(a: FValue, b: FValue): number | FError {
  if (a instanceof FError) return a;
  if (b instanceof FError) return b;
  if (a instanceof FDate || b instanceof FDate) {
    const da = toDate(a);
    const db = toDate(b);
    if (da instanceof FError) return da;
    if (db instanceof FError) return db;
    if (da === null || db === null) return da === db ? 0 : da === null ? -1 : 1;
    return Math.sign(da.ms - db.ms);
  }
  if (typeof a === 'number' || typeof b === 'number' || typeof a === 'boolean' || typeof b === 'boolean') {
    const na = toNumber(a);
    const nb = toNumber(b);
    if (!(na instanceof FError) && !(nb instanceof FError)) return Math.sign(na - nb);
  }
  const sa = toText(a);
  const sb = toText(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

export function flatten(values: FValue[]): FValue[] {
  const out: FValue[] = [];
  for (const v of values) {
    if (Array.isArray(v)) out.push(...flatten(v));
    else out.push(v);
  }
  return out;
}
