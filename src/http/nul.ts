import { TributaryError } from '../errors.ts';

/**
 * NUL is the one character PostgreSQL text cannot hold: an id, a name or a topic carrying one
 * would fail in a statement (a bare 500). Every interface refuses it at its edge instead.
 */

/** A 400 when a request URL (path or query) holds a NUL byte, raw or as `%00`. */
export function refuseNulInUrl(url: string): void {
  if (url.includes('\0') || /%00/i.test(url)) throw new TributaryError('invalid_request', 'the URL may not contain a NUL byte (%00)');
}

/** A 400 naming where a parsed JSON body holds a NUL character, in a string or a key. */
export function refuseNulInJson(value: unknown): void {
  const where = nulAt(value, '');
  if (where !== undefined) throw new TributaryError('invalid_request', `${where || 'body'}: text may not contain NUL (\\u0000)`);
}

function nulAt(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\0') ? path : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, item] of Object.entries(value)) {
    if (key.includes('\0')) return path || 'body';
    const found = nulAt(item, path ? `${path}.${key}` : key);
    if (found !== undefined) return found;
  }
  return undefined;
}
