import type { BaseModel } from './model.ts';
import type { Answer, RequestContext } from './request-context.ts';

/** The webhooks API; every call needs `webhook:manage` and counts against the base's rate limit. */
export function webhookRoute(ctx: RequestContext, baseId: string, hookId: string | undefined, action: string | undefined): Answer | undefined {
  const hooks = ctx.core.webhooks;
  const m = ctx.method;
  const auth = () => ctx.authorize('webhook:manage', baseId).base as BaseModel;
  if (hookId === undefined) {
    if (m === 'GET') {
      auth();
      return { status: 200, body: hooks.list(baseId) };
    }
    if (m === 'POST') {
      const base = auth();
      const body = ctx.jsonObject();
      return { status: 200, body: hooks.create(baseId, body, (id) => base.tables.some((t) => t.id === id)) };
    }
    return undefined;
  }
  if (action === undefined && m === 'DELETE') {
    auth();
    hooks.remove(baseId, hookId);
    return { status: 200, body: {} };
  }
  if (action === 'refresh' && m === 'POST') {
    auth();
    return { status: 200, body: hooks.refresh(baseId, hookId) };
  }
  if (action === 'enableNotifications' && m === 'POST') {
    auth();
    return { status: 200, body: hooks.enableNotifications(baseId, hookId, ctx.json()) };
  }
  if (action === 'payloads' && m === 'GET') {
    auth();
    return { status: 200, body: hooks.payloads(baseId, hookId, ctx.query.get('cursor'), ctx.query.get('limit')) };
  }
  return undefined;
}
