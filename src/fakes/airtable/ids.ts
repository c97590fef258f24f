import { randomBytes } from 'node:crypto';

/** Airtable ids are a three-letter prefix and 14 base-62 characters. */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function randomId(prefix: string): string {
  const bytes = randomBytes(14);
  let out = prefix;
  for (const b of bytes) out += BASE62[b % 62];
  return out;
}

/** murmur3's finaliser: a bijection on 32-bit integers, so distinct inputs stay distinct. */
export function fmix32(x: number): number {
  let h = x | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Hash of a few integers (seed, table index, row, salt): the generator's only source of randomness. */
export function hash(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) h = fmix32(h ^ Math.imul(p | 0, 0x27d4eb2d) ^ (Math.floor(p / 4294967296) | 0));
  return h;
}

export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

function base62(value: number, width: number): string {
  let out = '';
  let v = value;
  for (let i = 0; i < width; i++) {
    out = BASE62[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out;
}

/** A deterministic id for small things (tables, fields, choices, users): 14 chars from three hashes. */
export function seededId(prefix: string, ...parts: number[]): string {
  const a = hash(...parts, 1);
  const b = hash(...parts, 2);
  const c = hash(...parts, 3);
  return prefix + base62(a, 5) + base62(b, 5) + base62(c % 14776336, 4);
}

/**
 * Record ids of generated rows: 6 chars that identify the table, then the row passed through a
 * 32-bit bijection, so a million rows never collide and still look random.
 */
export function seededRecordId(tableSalt: number, row: number): string {
  return 'rec' + base62(tableSalt % 56800235584, 6) + base62(fmix32(row ^ tableSalt), 8);
}

export const RECORD_ID = /^rec[0-9A-Za-z]{14}$/;
