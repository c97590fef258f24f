/**
 * The search endpoints (`/v1/customers/search?query=email:'a@b.c'`): Stripe's query language
 * — `field:value`, `~` substring, `<`/`>`/`<=`/`>=`, `-` negation, `metadata['k']`, `null`,
 * clauses joined by all-AND or all-OR — over the live objects, newest first, paged by `page`.
 */
import type { Ctx, ResourceNames } from '../context.ts';
import { invalidRequest } from '../errors.ts';
import { limitOf } from '../lists.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { CHARGES, CUSTOMERS, INVOICES, PAYMENT_INTENTS, PRICES, PRODUCTS, SUBSCRIPTIONS } from './names.ts';

type Clause = (obj: StripeObject) => boolean;

const CLAUSE = /^\s*(-)?((?:metadata\[(?:'[^']*'|"[^"]*")\])|[a-z_][a-z0-9_.]*)\s*(:|~|>=|<=|>|<)\s*('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s]+)\s*/i;

function fieldValue(obj: StripeObject, field: string): unknown {
  const meta = /^metadata\[['"](.*)['"]\]$/.exec(field);
  if (meta) return (obj.metadata as Record<string, string> | null)?.[meta[1] as string];
  let v: unknown = obj;
  for (const part of field.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined;
  return v;
}

function parseValue(raw: string): string | number | null {
  if (raw.startsWith("'") || raw.startsWith('"')) return raw.slice(1, -1).replace(/\\(.)/g, '$1');
  if (raw === 'null') return null;
  const n = Number(raw);
  if (Number.isFinite(n)) return n;
  return raw;
}

function clause(negate: boolean, field: string, op: string, value: string | number | null): Clause {
  const test = (obj: StripeObject): boolean => {
    const v = fieldValue(obj, field);
    if (value === null) return v === null || v === undefined;
    switch (op) {
      case ':':
        return typeof v === 'string' && typeof value === 'string' ? v.toLowerCase() === value.toLowerCase() : String(v) === String(value);
      case '~':
        return typeof v === 'string' && v.toLowerCase().includes(String(value).toLowerCase());
      case '>':
        return typeof v === 'number' && v > Number(value);
      case '<':
        return typeof v === 'number' && v < Number(value);
      case '>=':
        return typeof v === 'number' && v >= Number(value);
      default:
        return typeof v === 'number' && v <= Number(value);
    }
  };
  return negate ? (obj) => !test(obj) : test;
}

export function parseQuery(query: string): Clause {
  let rest = query;
  const clauses: Clause[] = [];
  let joiner: 'AND' | 'OR' | undefined;
  while (rest.trim() !== '') {
    const m = CLAUSE.exec(rest);
    if (!m) throw invalidRequest(`Query parsing failed. Check the syntax of your query: ${query}`, { param: 'query' });
    const [neg, field, op, raw] = [m[1], m[2] as string, m[3] as string, m[4] as string];
    if (op === '~' && parseValue(raw) !== null && String(parseValue(raw)).length < 3) {
      throw invalidRequest('Substring matching (~) requires at least 3 characters.', { param: 'query' });
    }
    clauses.push(clause(neg === '-', field, op, parseValue(raw)));
    rest = rest.slice(m[0].length);
    const j = /^(AND|OR)\s+/.exec(rest);
    if (j) {
      if (joiner && joiner !== j[1]) throw invalidRequest('Query parsing failed: AND and OR cannot be mixed in one query.', { param: 'query' });
      joiner = j[1] as 'AND' | 'OR';
      rest = rest.slice(j[0].length);
    } else if (rest.trim() !== '') throw invalidRequest(`Query parsing failed. Check the syntax of your query: ${query}`, { param: 'query' });
  }
  if (clauses.length === 0) throw invalidRequest('Query parsing failed: the query is empty.', { param: 'query' });
  if (clauses.length > 10) throw invalidRequest('Queries are limited to 10 clauses.', { param: 'query' });
  return joiner === 'OR' ? (o) => clauses.some((c) => c(o)) : (o) => clauses.every((c) => c(o));
}

function search(ctx: Ctx, res: ResourceNames, call: Call, url: string): unknown {
  const match = parseQuery(String(call.params.query ?? ''));
  const limit = limitOf(call.params);
  let offset = 0;
  if (typeof call.params.page === 'string') {
    const decoded = Number(
      Buffer.from(call.params.page, 'base64url')
        .toString('utf8')
        .replace(/^offset:/, ''),
    );
    if (!Number.isInteger(decoded) || decoded < 0) throw invalidRequest('Invalid page token.', { param: 'page' });
    offset = decoded;
  }
  const order = ctx.col(res.name).ordered();
  const data: StripeObject[] = [];
  let seen = 0;
  let more = false;
  for (let i = order.length - 1; i >= 0; i--) {
    const e = order[i];
    if (!e || e.deleted || !match(e.obj)) continue;
    if (seen++ < offset) continue;
    if (data.length === limit) {
      more = true;
      break;
    }
    data.push(e.obj);
  }
  const next = more ? Buffer.from(`offset:${offset + limit}`).toString('base64url') : null;
  return { object: 'search_result', data, has_more: more, next_page: next, url };
}

const SEARCHABLE: Array<[ResourceNames, string]> = [
  [CUSTOMERS, '/v1/customers/search'],
  [CHARGES, '/v1/charges/search'],
  [INVOICES, '/v1/invoices/search'],
  [PAYMENT_INTENTS, '/v1/payment_intents/search'],
  [PRICES, '/v1/prices/search'],
  [PRODUCTS, '/v1/products/search'],
  [SUBSCRIPTIONS, '/v1/subscriptions/search'],
];

export const searchRoutes: Route[] = SEARCHABLE.map(([res, url]) => ({
  method: 'GET' as const,
  template: url,
  group: res.group,
  handler: (call: Call) => search(call.ctx, res, call, url),
}));
