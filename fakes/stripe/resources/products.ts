/** Products: CRUD; a product with prices cannot be deleted; `default_price_data` creates its price. */
import type { Ctx } from '../context.ts';
import { invalidRequest, noSuch } from '../errors.ts';
import type { Params } from '../params.ts';
import type { Call } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { assignNullable, ids, isHash, mergeMetadata } from './common.ts';
import { both, crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { PRICES, PRODUCTS } from './names.ts';
import { createPrice } from './prices.ts';

const NULLABLE = ['description', 'shippable', 'statement_descriptor', 'tax_code', 'unit_label', 'url'];

function applyParams(current: StripeObject, p: Params): StripeObject {
  const next: StripeObject = { ...current };
  assignNullable(next, p, NULLABLE);
  if (typeof p.name === 'string') {
    if (p.name === '')
      throw invalidRequest(
        "You passed an empty string for 'name'. We assume empty values are an attempt to unset a parameter; however 'name' cannot be unset. You should remove 'name' from your request or supply a non-empty value.",
        { param: 'name', code: 'parameter_invalid_empty' },
      );
    next.name = p.name;
  }
  if (typeof p.active === 'boolean') next.active = p.active;
  if (Array.isArray(p.images)) next.images = p.images;
  else if (p.images === '') next.images = [];
  if (Array.isArray(p.marketing_features)) next.marketing_features = p.marketing_features.map((f) => ({ name: isHash(f) ? f.name : null }));
  else if (p.marketing_features === '') next.marketing_features = [];
  if (p.package_dimensions !== undefined) next.package_dimensions = isHash(p.package_dimensions) ? p.package_dimensions : null;
  next.metadata = mergeMetadata(current.metadata as Record<string, string>, p.metadata);
  return next;
}

export function newProduct(ctx: Ctx, id: string, name: string): StripeObject {
  return {
    id,
    object: 'product',
    active: true,
    created: ctx.now,
    default_price: null,
    description: null,
    images: [],
    livemode: ctx.livemode,
    marketing_features: [],
    metadata: {},
    name,
    package_dimensions: null,
    shippable: null,
    statement_descriptor: null,
    tax_code: null,
    unit_label: null,
    updated: ctx.now,
    url: null,
  };
}

function create({ ctx, params }: Call): StripeObject {
  const id = typeof params.id === 'string' && params.id !== '' ? params.id : ctx.newId(PRODUCTS.prefix);
  if (ctx.col(PRODUCTS.name).entry(id)) throw invalidRequest(`Product already exists.`, { code: 'resource_already_exists', param: 'id' });
  const product = ctx.insert(PRODUCTS, applyParams(newProduct(ctx, id, params.name as string), params));
  const data = params.default_price_data;
  if (!isHash(data)) return product;
  const price = createPrice(ctx, { ...data, product: product.id }, 'default_price_data');
  return ctx.save(PRODUCTS, { ...product, default_price: price.id });
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next = applyParams(current, params);
  if (params.default_price !== undefined) {
    const priceId = params.default_price === '' ? null : (params.default_price as string);
    if (priceId !== null) {
      const price = ctx.get(PRICES, priceId);
      if (!price) throw noSuch('price', priceId, 'default_price');
      if (price.product !== current.id) throw invalidRequest(`The price ${priceId} does not belong to product ${current.id}.`, { param: 'default_price' });
    }
    next.default_price = priceId;
  }
  // `updated` moves only when something else did.
  const changed = Object.keys(next).some((k) => JSON.stringify(next[k]) !== JSON.stringify(current[k]));
  return ctx.save(PRODUCTS, changed ? { ...next, updated: ctx.now } : current);
}

function remove({ ctx }: Call, current: StripeObject): unknown {
  for (const price of ctx.col(PRICES.name).values()) {
    if (price.product === current.id) throw invalidRequest('This product cannot be deleted because it has one or more user-created prices.');
  }
  return ctx.destroy(PRODUCTS, current);
}

export const products: ResourceDef = {
  ...PRODUCTS,
  path: '/v1/products',
  idParam: 'id',
  create,
  update,
  remove,
  filter: ({ params }) => {
    const wanted = ids(params.ids);
    return both(fieldFilter(params, ['active', 'shippable', 'url']), wanted.length > 0 ? (o) => wanted.includes(o.id) : undefined);
  },
};

export const productRoutes = crudRoutes(products);
