/** `GET /v1/events` and `/v1/events/:id`: newest first, 30 days back at most. */
import { EVENT_RETENTION_SECONDS } from '../events.ts';
import { invalidRequest, noSuch } from '../errors.ts';
import { page } from '../lists.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { EVENTS } from './names.ts';

/** `customer.*` matches every customer event; anything else matches exactly. */
function typeMatcher(pattern: string): (type: string) => boolean {
  if (!pattern.includes('*')) return (t) => t === pattern;
  const re = new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
  return (t) => re.test(t);
}

function list({ ctx, params }: Call): unknown {
  const types = Array.isArray(params.types) ? params.types.map(String) : undefined;
  if (types && types.length > 20) throw invalidRequest('Array types exceeded maximum 20 allowed elements.', { param: 'types' });
  if (types && typeof params.type === 'string') throw invalidRequest('You may only specify one of these parameters: type, types.', { param: 'type' });
  const matchers = (types ?? (typeof params.type === 'string' ? [params.type] : [])).map(typeMatcher);
  const late = ctx.account.late;
  // A late event is not listed yet, wherever newer ones already are (eventual consistency).
  const filter = (e: StripeObject) => (!late || late.visible(e.id)) && (matchers.length === 0 || matchers.some((m) => m(e.type as string)));
  const col = ctx.col(EVENTS.name);
  return page(col.ordered(), {
    params,
    url: '/v1/events',
    noun: 'event',
    cursor: (id) => col.entry(id),
    notBefore: ctx.clock.now() - EVENT_RETENTION_SECONDS,
    filter,
  });
}

function retrieve({ ctx, path }: Call): unknown {
  const event = ctx.get(EVENTS, path.id as string);
  const hidden = event && ctx.account.late && !ctx.account.late.visible(event.id);
  if (!event || hidden || (event.created as number) < ctx.clock.now() - EVENT_RETENTION_SECONDS) throw noSuch('event', path.id as string);
  return event;
}

export const eventRoutes: Route[] = [
  { method: 'GET', template: '/v1/events', group: EVENTS.group, handler: list },
  { method: 'GET', template: '/v1/events/{id}', group: EVENTS.group, handler: retrieve },
];
