/** The five standard endpoints of a resource, from its hooks. */
import type { Ctx, ResourceNames } from '../context.ts';
import { noSuch } from '../errors.ts';
import { type ListPage, page } from '../lists.ts';
import type { Params } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';

export interface ResourceDef extends ResourceNames {
  /** '/v1/customers' */
  path: string;
  /** The id's name in the spec's templates: '/v1/customers/{customer}' → 'customer'. */
  idParam: string;
  create?: (call: Call) => StripeObject;
  /** Stores (ctx.save) and returns the new version. */
  update?: (call: Call, current: StripeObject) => StripeObject;
  /** DELETE's answer; deletes (ctx.destroy) or, for subscriptions, cancels. */
  remove?: (call: Call, current: StripeObject) => unknown;
  /** List filters beyond `created` and the cursors. */
  filter?: (call: Call) => ((obj: StripeObject) => boolean) | undefined;
  /** GET one, when it differs from "the live object or 404". */
  retrieve?: (call: Call, id: string) => unknown;
}

/** A page of the resource's collection: newest first, filtered. */
export function listPage(ctx: Ctx, def: ResourceNames, params: Params, url: string, filter?: (obj: StripeObject) => boolean): ListPage {
  const col = ctx.col(def.name);
  return page(col.ordered(), { params, url, cursor: (id) => col.entry(id), noun: def.noun, ...(filter ? { filter } : {}) });
}

export function crudRoutes(def: ResourceDef): Route[] {
  const one = `${def.path}/{${def.idParam}}`;
  const routes: Route[] = [
    { method: 'GET', template: def.path, group: def.group, handler: (call) => listPage(call.ctx, def, call.params, def.path, def.filter?.(call)) },
    {
      method: 'GET',
      template: one,
      group: def.group,
      handler: (call) => {
        const id = call.path[def.idParam] as string;
        if (def.retrieve) return def.retrieve(call, id);
        const obj = call.ctx.get(def, id);
        if (!obj) throw noSuch(def.noun, id);
        return obj;
      },
    },
  ];
  const { create, update, remove } = def;
  if (create) routes.push({ method: 'POST', template: def.path, group: def.group, handler: (call) => create(call) });
  if (update) {
    routes.push({ method: 'POST', template: one, group: def.group, handler: (call) => update(call, call.ctx.find(def, call.path[def.idParam] as string)) });
  }
  if (remove) {
    routes.push({ method: 'DELETE', template: one, group: def.group, handler: (call) => remove(call, call.ctx.find(def, call.path[def.idParam] as string)) });
  }
  return routes;
}

/** Equality filters for list parameters that name a field of the object. */
export function fieldFilter(params: Params, fields: string[]): ((obj: StripeObject) => boolean) | undefined {
  const wanted = fields.filter((f) => params[f] !== undefined).map((f) => [f, params[f]] as const);
  if (wanted.length === 0) return undefined;
  return (obj) => wanted.every(([f, v]) => obj[f] === v);
}

export function both(...filters: Array<((obj: StripeObject) => boolean) | undefined>): ((obj: StripeObject) => boolean) | undefined {
  const fs = filters.filter((f): f is (obj: StripeObject) => boolean => f !== undefined);
  if (fs.length === 0) return undefined;
  if (fs.length === 1) return fs[0];
  return (obj) => fs.every((f) => f(obj));
}
