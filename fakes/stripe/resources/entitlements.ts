/**
 * Entitlement features: create, update (name, metadata, active), list, retrieve. Products'
 * features and customers' active entitlements stay unmodeled (empty lists): what the fake needs
 * to say is whether an account uses Entitlements at all.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam } from '../errors.ts';
import type { Call } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { bool, mergeMetadata, str } from './common.ts';
import { both, crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { ENTITLEMENT_FEATURES } from './names.ts';

function create({ ctx, params }: Call): StripeObject {
  const name = str(params.name);
  if (!name) throw missingParam('name');
  const lookupKey = str(params.lookup_key);
  if (!lookupKey) throw missingParam('lookup_key');
  for (const feature of ctx.col(ENTITLEMENT_FEATURES.name).values()) {
    if (feature.lookup_key === lookupKey) throw invalidRequest(`A feature with lookup_key '${lookupKey}' already exists.`, { param: 'lookup_key' });
  }
  return ctx.insert(ENTITLEMENT_FEATURES, {
    id: ctx.newId(ENTITLEMENT_FEATURES.prefix),
    object: ENTITLEMENT_FEATURES.object,
    active: true,
    // Kept for the list's order; Stripe's feature has no `created` (taken off when read).
    created: ctx.now,
    livemode: ctx.livemode,
    lookup_key: lookupKey,
    metadata: mergeMetadata({}, params.metadata),
    name,
  });
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  const name = str(params.name);
  if (name) next.name = name;
  const active = bool(params.active);
  if (active !== undefined) next.active = active;
  return ctx.save(ENTITLEMENT_FEATURES, next);
}

export const entitlementFeatures: ResourceDef = {
  ...ENTITLEMENT_FEATURES,
  path: '/v1/entitlements/features',
  idParam: 'id',
  create,
  update,
  filter: ({ params }) => {
    const archived = bool(params.archived);
    return both(fieldFilter(params, ['lookup_key']), archived === undefined ? undefined : (f) => f.active === !archived);
  },
};

export const entitlementRoutes = crudRoutes(entitlementFeatures);

/** A feature as Stripe shows it: without the creation time the fake orders by. */
export function renderFeature(_ctx: Ctx, feature: StripeObject): StripeObject {
  const { created: _created, ...shown } = feature;
  return shown as StripeObject;
}
