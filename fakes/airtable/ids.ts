import { randomBytes } from 'node:crypto';
import { fmix32, hash, hash4 } from '../shared/hash.ts';

export { fmix32, hash, hash4, hashString } from '../shared/hash.ts';

/** Airtable ids are a three-letter prefix and 14 base-62 characters. */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function randomId(prefix: string): string {
  const bytes = randomBytes(14);
  let out = prefix;
  for (const b of bytes) out += BASE62[b % 62];
  return out;
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
 * Record ids of generated rows: the row passes through a 32-bit bijection and is spelled in six
 * base-62 digits (shifted per table), interleaved with eight hashed filler characters. The six
 * digits keep a million rows distinct; the fillers make the ids look random.
 */
export function seededRecordId(tableSalt: number, row: number): string {
  let x = fmix32(row ^ tableSalt);
  const filler = hash4(tableSalt, row, 0xf111, 0);
  const filler2 = hash4(tableSalt, row, 0xf112, 0);
  const codes = REC_CODES.slice();
  for (let i = 0; i < 14; i++) {
    let digit: number;
    if (i % 2 === 1 && i < 12) {
      digit = ((x % 62) + ((tableSalt >>> ((i >> 1) * 5)) % 62)) % 62;
      x = Math.floor(x / 62);
    } else {
      digit = (i < 7 ? filler >>> (i * 4) : filler2 >>> ((i - 7) * 4)) % 62;
    }
    codes[3 + i] = BASE62_CODES[digit] as number;
  }
  return String.fromCharCode(...codes);
}

const BASE62_CODES = Array.from(BASE62, (c) => c.charCodeAt(0));
const REC_CODES = Array.from('rec00000000000000', (c) => c.charCodeAt(0));

export const RECORD_ID = /^rec[0-9A-Za-z]{14}$/;
