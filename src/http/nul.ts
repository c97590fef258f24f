import { TributaryError } from '../errors.ts';

/**
 * NUL is the one character PostgreSQL text cannot hold: an id, a name or a topic carrying one
 * would fail in a statement (a bare 500). Every interface refuses it at its edge instead.
 */

/** A 400 when a request URL (path or query) holds a NUL byte, raw or as `%00`. */
export function refuseNulInUrl(url: string): void {
  if (url.includes('\0') || /%00/i.test(url)) throw new TributaryError('invalid_request', 'the URL may not contain a NUL byte (%00)');
}

/** How deep a JSON body may nest: no route takes more than a few levels. */
export const MAX_JSON_DEPTH = 64;

/**
 * A 400 naming where a parsed JSON body holds a NUL character, in a string or a key, or when
 * it nests deeper than MAX_JSON_DEPTH. The walk keeps its own stack: a 1 MB `[[[…]]]` would
 * overflow the call stack of a recursive one (a 500).
 */
export function refuseNulInJson(value: unknown): void {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value, path: '', depth: 0 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { value: v, path, depth } = item;
    if (typeof v === 'string') {
      if (v.includes('\0')) throw new TributaryError('invalid_request', `${path || 'body'}: text may not contain NUL (\\u0000)`);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH) throw new TributaryError('invalid_request', `${path || 'body'}: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
    // Pushed in reverse, so the first offending place in document order is the one named.
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!;
      if (key.includes('\0')) throw new TributaryError('invalid_request', `${path || 'body'}: text may not contain NUL (\\u0000)`);
      stack.push({ value: child, path: path ? `${path}.${key}` : key, depth: depth + 1 });
    }
  }
}
