/**
 * Real Stripe endpoints the fake does not model. An account that never used a feature has no
 * objects of it, so lists answer empty and retrievals 404 — exactly what Stripe would say.
 * Writes cannot be faked that way and answer 404 naming the fake's gap.
 */
import type { Ctx } from './context.ts';
import { notImplemented, noSuch } from './errors.ts';
import type { Resolved } from './router.ts';

/** Parents the fake models: a list under a missing one is a 404 about the parent. */
const PARENTS: Record<string, { collection: string; noun: string }> = {
  customers: { collection: 'customers', noun: 'customer' },
  products: { collection: 'products', noun: 'product' },
  invoices: { collection: 'invoices', noun: 'invoice' },
  charges: { collection: 'charges', noun: 'charge' },
  subscriptions: { collection: 'subscriptions', noun: 'subscription' },
  payment_intents: { collection: 'payment_intents', noun: 'payment_intent' },
  sessions: { collection: 'checkout_sessions', noun: 'checkout.session' },
};

function checkParents(ctx: Ctx, template: string, path: Record<string, string>): void {
  const segs = template.split('/').filter((s) => s !== '');
  for (let i = 1; i < segs.length; i++) {
    const seg = segs[i] as string;
    if (!seg.startsWith('{')) continue;
    const parent = PARENTS[segs[i - 1] as string];
    const name = seg.slice(1, -1);
    const id = path[name] as string;
    if (parent && !ctx.col(parent.collection).get(id)) throw noSuch(parent.noun, id, name);
  }
}

/** Permission group of an unmodeled resource, from its object name ('tax_rate', 'issuing_card'). */
export function groupOf(resolved: Resolved): string {
  return (resolved.info?.object ?? resolved.template.split('/')[2] ?? 'unknown').replace(/[./]/g, '_');
}

export function unmodeled(ctx: Ctx, method: string, pathname: string, resolved: Resolved): unknown {
  const info = resolved.info;
  if (method !== 'GET' || !info) throw notImplemented(method, pathname);
  checkParents(ctx, resolved.template, resolved.path);
  switch (info.kind) {
    case 'list':
      return { object: 'list', data: [], has_more: false, url: pathname };
    case 'search':
      return { object: 'search_result', data: [], has_more: false, next_page: null, url: pathname };
    case 'object': {
      const names = Object.keys(resolved.path);
      const last = names[names.length - 1];
      if (last === undefined) throw notImplemented(method, pathname);
      throw noSuch((info.object ?? 'object').replace(/[._]/g, ' '), resolved.path[last] as string, last);
    }
    default:
      throw notImplemented(method, pathname);
  }
}
