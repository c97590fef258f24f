/** Coupons: CRUD (only name and metadata change after creation). */
import type { Ctx } from '../context.ts';
import { couponId } from '../ids.ts';
import { invalidRequest, missingParam } from '../errors.ts';
import type { Call } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { int, isHash, mergeMetadata, str } from './common.ts';
import { crudRoutes, type ResourceDef } from './crud.ts';
import { COUPONS } from './names.ts';

export interface CouponFields {
  id: string;
  amountOff: number | null;
  percentOff: number | null;
  currency: string | null;
  duration: string;
  months: number | null;
  maxRedemptions?: number | null;
  metadata?: Record<string, string>;
  name?: string | null;
  redeemBy?: number | null;
  timesRedeemed?: number;
}

export function couponTemplate(ctx: Ctx, f: CouponFields): StripeObject {
  return {
    id: f.id,
    object: 'coupon',
    amount_off: f.amountOff,
    created: ctx.now,
    currency: f.currency,
    duration: f.duration,
    duration_in_months: f.months,
    livemode: ctx.livemode,
    max_redemptions: f.maxRedemptions ?? null,
    metadata: f.metadata ?? {},
    name: f.name ?? null,
    percent_off: f.percentOff,
    redeem_by: f.redeemBy ?? null,
    times_redeemed: f.timesRedeemed ?? 0,
    valid: f.redeemBy == null || f.redeemBy > ctx.now,
  };
}

function create({ ctx, params }: Call): StripeObject {
  const id = str(params.id) ?? couponId(ctx.newId('x').slice(-8));
  if (ctx.col(COUPONS.name).entry(id)) throw invalidRequest('Coupon already exists.', { code: 'resource_already_exists', param: 'id' });
  const amountOff = int(params.amount_off) ?? null;
  const percentOff = typeof params.percent_off === 'number' ? params.percent_off : null;
  if ((amountOff === null) === (percentOff === null)) {
    throw invalidRequest('You must pass exactly one of amount_off or percent_off.', { param: amountOff === null ? 'percent_off' : 'amount_off' });
  }
  if (percentOff !== null && (percentOff <= 0 || percentOff > 100))
    throw invalidRequest('Invalid percent_off: must be greater than 0 and at most 100', { param: 'percent_off' });
  const currency = str(params.currency)?.toLowerCase() ?? null;
  if (amountOff !== null && !currency) throw missingParam('currency');
  const duration = (params.duration as string | undefined) ?? 'once';
  const months = int(params.duration_in_months) ?? null;
  if (duration === 'repeating' && months === null) throw missingParam('duration_in_months');
  if (duration !== 'repeating' && months !== null) {
    throw invalidRequest('duration_in_months can only be set when duration is repeating.', { param: 'duration_in_months' });
  }
  const coupon = couponTemplate(ctx, {
    id,
    amountOff,
    percentOff,
    currency,
    duration,
    months,
    maxRedemptions: int(params.max_redemptions) ?? null,
    metadata: mergeMetadata({}, params.metadata),
    name: str(params.name) ?? null,
    redeemBy: int(params.redeem_by) ?? null,
  });
  if (isHash(params.applies_to) && Array.isArray(params.applies_to.products)) coupon.applies_to = { products: params.applies_to.products };
  return ctx.insert(COUPONS, coupon);
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  if (params.name !== undefined) next.name = params.name === '' ? null : params.name;
  return ctx.save(COUPONS, next);
}

export const coupons: ResourceDef = {
  ...COUPONS,
  path: '/v1/coupons',
  idParam: 'coupon',
  create,
  update,
  remove: ({ ctx }, current) => ctx.destroy(COUPONS, current),
};

export const couponRoutes = crudRoutes(coupons);
