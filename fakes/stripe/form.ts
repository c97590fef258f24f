/**
 * Stripe's parameter encoding: `a=1&b[c]=2&items[0][price]=p&expand[]=x`, in form bodies and
 * query strings alike. Decoding yields a raw tree of strings and string-keyed nodes; whether a
 * node is an array (`[0]`, `[]`) or a hash is only decided against the endpoint's parameter
 * schema (params.ts), because hash keys such as `metadata[0]` may look like indexes.
 */
import { invalidRequest } from './errors.ts';

export type RawNode = { [key: string]: RawValue };
export type RawValue = string | RawNode;

function splitKey(key: string): string[] | undefined {
  const open = key.indexOf('[');
  if (open === -1) return [key];
  if (open === 0) return undefined;
  const parts = [key.slice(0, open)];
  let i = open;
  while (i < key.length) {
    if (key[i] !== '[') return undefined;
    const close = key.indexOf(']', i);
    if (close === -1) return undefined;
    parts.push(key.slice(i + 1, close));
    i = close + 1;
  }
  return parts;
}

function child(node: RawNode, part: string, fullKey: string): RawNode {
  let key = part;
  if (part === '') key = String(Object.keys(node).length);
  const existing = node[key];
  if (existing === undefined) {
    const created: RawNode = {};
    node[key] = created;
    return created;
  }
  if (typeof existing === 'string') throw invalidRequest(`Invalid request: ${fullKey} mixes a value and a hash.`);
  return existing;
}

/** Decodes `application/x-www-form-urlencoded` text (a body or a query string without '?'). */
export function decodeForm(text: string): RawNode {
  const root: RawNode = {};
  for (const [key, value] of new URLSearchParams(text)) {
    if (key === '') continue;
    const parts = splitKey(key);
    if (!parts) throw invalidRequest(`Invalid request: could not parse the parameter name ${key}.`);
    let node = root;
    for (let i = 0; i < parts.length - 1; i++) node = child(node, parts[i] as string, key);
    let last = parts[parts.length - 1] as string;
    if (last === '') last = String(Object.keys(node).length);
    if (typeof node[last] === 'object') throw invalidRequest(`Invalid request: ${key} mixes a value and a hash.`);
    node[last] = value;
  }
  return root;
}

/** A stable text of a decoded tree, for comparing idempotent requests' parameters. */
export function fingerprint(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined';
  if (Array.isArray(value)) return `[${value.map(fingerprint).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${fingerprint((value as Record<string, unknown>)[k])}`).join(',')}}`;
}
