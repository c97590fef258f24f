/** Parameter-to-field helpers shared by the resources: Stripe's "empty string unsets" rules. */
import { invalidRequest } from '../errors.ts';
import type { Params, Value } from '../params.ts';

export type Json = { [key: string]: unknown };

export const isHash = (v: unknown): v is Record<string, Value> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function str(v: Value | undefined): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

export function int(v: Value | undefined): number | undefined {
  return typeof v === 'number' ? v : undefined;
}

export function bool(v: Value | undefined): boolean | undefined {
  return typeof v === 'boolean' ? v : undefined;
}

/** A nullable field's new value: '' unsets (null), absent keeps `current`. */
export function nullable<T>(v: Value | undefined, current: T): T | Value | null {
  if (v === undefined) return current;
  if (v === '') return null;
  return v;
}

const METADATA_KEYS = 50;

/**
 * Stripe's metadata rules: `metadata=''` clears everything, `metadata[k]=''` removes k, other
 * keys merge into what is there. At most 50 keys, 40-character keys, 500-character values.
 */
export function mergeMetadata(current: Record<string, string> | null | undefined, v: Value | undefined): Record<string, string> {
  const base = { ...(current ?? {}) };
  if (v === undefined) return base;
  if (v === '') return {};
  if (!isHash(v)) throw invalidRequest('Invalid hash', { param: 'metadata' });
  for (const [k, x] of Object.entries(v)) {
    if (k.length > 40) throw invalidRequest(`Metadata keys must be at most 40 characters.`, { param: `metadata[${k}]` });
    if (x === '' || x === null) delete base[k];
    else {
      const text = String(x);
      if (text.length > 500) throw invalidRequest('Metadata values must be at most 500 characters.', { param: `metadata[${k}]` });
      base[k] = text;
    }
  }
  if (Object.keys(base).length > METADATA_KEYS) throw invalidRequest('You can have at most 50 metadata keys.', { param: 'metadata' });
  return base;
}

export const EMPTY_ADDRESS = { city: null, country: null, line1: null, line2: null, postal_code: null, state: null };

export function address(v: Value | undefined, current: Json | null): Json | null {
  if (v === undefined) return current;
  if (v === '' || !isHash(v)) return null;
  return { ...EMPTY_ADDRESS, ...(current ?? {}), ...v };
}

/** A `shipping` hash: {address, carrier?, name, phone?, tracking_number?}. */
export function shipping(v: Value | undefined, current: Json | null): Json | null {
  if (v === undefined) return current;
  if (v === '' || !isHash(v)) return null;
  return {
    address: { ...EMPTY_ADDRESS, ...(isHash(v.address) ? v.address : {}) },
    carrier: v.carrier ?? null,
    name: v.name ?? null,
    phone: v.phone ?? null,
    tracking_number: v.tracking_number ?? null,
  };
}

/** Copies simple fields from params: '' unsets to null. */
export function assignNullable(target: Json, params: Params, keys: string[]): void {
  for (const k of keys) if (params[k] !== undefined) target[k] = params[k] === '' ? null : params[k];
}

export function embeddedList<T>(data: T[], url: string, hasMore = false): { object: 'list'; data: T[]; has_more: boolean; url: string } {
  return { object: 'list', data, has_more: hasMore, url };
}

export function ids(v: Value | undefined): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}
