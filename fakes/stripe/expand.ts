/**
 * `expand[]=customer`, `expand[]=data.latest_invoice.payments`: replaces id references with the
 * objects they name, and adds the "includable" fields Stripe leaves out unless asked
 * (customer.subscriptions, invoice.payments…). At most four levels, like Stripe.
 */
import type { Ctx } from './context.ts';
import { invalidRequest } from './errors.ts';
import { collectionOfId, type StripeObject } from './store.ts';

/** Fields Stripe only includes on request, per object type. */
export type Includables = Record<string, Record<string, (ctx: Ctx, obj: StripeObject) => unknown>>;

type Node = Record<string, unknown>;

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);

function resolveId(ctx: Ctx, id: string): unknown {
  const name = collectionOfId(id);
  if (!name) return id;
  const entry = ctx.col(name).entry(id);
  if (!entry) return id;
  // Deleted customers (the only kind Stripe keeps) expand to their stub.
  if (entry.deleted) return { id, object: entry.obj.object, deleted: true };
  return structuredClone(entry.obj);
}

function cannotExpand(path: string): never {
  throw invalidRequest(`This property cannot be expanded (${path}).`, { param: 'expand' });
}

/** The nearest enclosing object (one with an `object` type) and the path from it, for nested includables. */
interface Owner {
  obj: Node;
  prefix: string;
}

function walk(ctx: Ctx, node: unknown, parts: string[], full: string, includables: Includables, owner?: Owner): void {
  if (!isNode(node)) return;
  if (node.object === 'list' || node.object === 'search_result') {
    if (parts[0] !== 'data') cannotExpand(full);
    for (const item of node.data as unknown[]) walk(ctx, item, parts.slice(1), full, includables);
    return;
  }
  const [key, ...rest] = parts as [string, ...string[]];
  // A plain hash inside an object (payment_intent.amount_details) names its includables from that object.
  const here: Owner = node.object !== undefined ? { obj: node, prefix: '' } : { obj: owner?.obj ?? node, prefix: owner?.prefix ?? '' };
  let value = node[key];
  if (value === undefined) {
    const include = includables[String(here.obj.object)]?.[here.prefix + key];
    if (!include) cannotExpand(full);
    value = node[key] = include(ctx, here.obj as StripeObject);
  }
  if (typeof value === 'string') value = node[key] = resolveId(ctx, value);
  else if (Array.isArray(value)) value = node[key] = value.map((v) => (typeof v === 'string' ? resolveId(ctx, v) : v));
  if (rest.length === 0 || value === null) return;
  const inner: Owner = { obj: here.obj, prefix: `${here.prefix}${key}.` };
  if (Array.isArray(value)) for (const v of value) walk(ctx, v, rest, full, includables, inner);
  else walk(ctx, value, rest, full, includables, inner);
}

/** A copy of `body` with the expansions applied; `body` itself (a stored object) is untouched. */
export function applyExpand(ctx: Ctx, body: unknown, paths: string[], includables: Includables): unknown {
  if (paths.length === 0) return body;
  const out = structuredClone(body);
  for (const path of paths) {
    const parts = path.split('.');
    const depth = isNode(out) && out.object === 'list' ? parts.length - 1 : parts.length;
    if (depth > 4) throw invalidRequest(`You cannot expand more than 4 levels of a property. Property: ${path}`, { param: 'expand' });
    if (parts.some((p) => p === '')) cannotExpand(path);
    walk(ctx, out, parts, path, includables);
  }
  return out;
}
