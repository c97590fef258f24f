import { randomBytes } from 'node:crypto';
import { fmix32, hash4, hashString } from '../shared/hash.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Two spellings of Stripe ids: older resources use 14 random characters (`cus_QXg1o8vcGmoR32`,
 * `prod_…`); newer ones 24, a '1', a time-ish part, the account's tag and random characters
 * (`pi_1PgafyB7WZ01zgkWSjxsAJo3`).
 */
const SHORT = new Set(['cus', 'prod', 'req', 'cs_test', 'cs_live']);

function randomChars(n: number): string {
  const bytes = randomBytes(n);
  let out = '';
  for (const b of bytes) out += BASE62[b % 62];
  return out;
}

function seededChars(n: number, a: number, b: number, c: number): string {
  let out = '';
  let h = hash4(a, b, c, 0);
  for (let i = 0; i < n; i++) {
    if (i % 5 === 0) h = hash4(a, b, c, i + 1);
    out += BASE62[h % 62];
    h = Math.floor(h / 62);
  }
  return out;
}

/** The 8 characters an account stamps into its long ids. */
export function accountTag(accountId: string): string {
  return seededChars(8, hashString(accountId), 0x7a9, 0);
}

function shape(prefix: string, tag: string, chars: (n: number) => string): string {
  if (SHORT.has(prefix)) return `${prefix}_${chars(prefix.startsWith('cs_') ? 58 : 14)}`;
  return `${prefix}_1${chars(7)}${tag}${chars(8)}`;
}

export function randomId(prefix: string, tag: string): string {
  return shape(prefix, tag, randomChars);
}

/**
 * Deterministic ids for generated objects. The index goes through a 32-bit bijection and is
 * spelled in six base-62 digits at the front, so distinct indexes never collide; the rest is
 * seeded filler so the ids look random.
 */
export function seededId(prefix: string, tag: string, seed: number, salt: number, index: number): string {
  let first = true;
  return shape(prefix, tag, (n) => {
    if (!first) return seededChars(n, seed, salt ^ 0x5bd1e995, index);
    first = false;
    let v = fmix32((index ^ Math.imul(salt, 0x9e3779b1)) >>> 0);
    let head = '';
    for (let i = 0; i < 6; i++) {
      head += BASE62[v % 62];
      v = Math.floor(v / 62);
    }
    return (head + seededChars(n, seed, salt, index)).slice(0, n);
  });
}

export function requestId(): string {
  return `req_${randomChars(14)}`;
}

export function accountId(): string {
  return `acct_1${randomChars(15)}`;
}

/** A coupon's default id: 8 upper-case letters and digits, as the Dashboard makes them. */
export function couponId(chars: string): string {
  return chars
    .toUpperCase()
    .replace(/[^0-9A-Z]/g, '7')
    .slice(0, 8);
}

/** A webhook endpoint's signing secret. */
export function webhookSecret(): string {
  return `whsec_${randomChars(32)}`;
}
