/**
 * Discounts: coupons applied to a subscription (`discounts[][coupon]` on create or update). The
 * fake records them, on the subscription and with customer.discount.created / .deleted, but
 * never takes them off an amount (nor counts the coupon's times_redeemed).
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, noSuch } from '../errors.ts';
import type { Value } from '../params.ts';
import type { StripeObject } from '../store.ts';
import { addInterval } from './billing.ts';
import { isHash, str } from './common.ts';
import { COUPONS } from './names.ts';

/** Discounts have no `created`, so they are kept beside the store, by id. */
function stored(ctx: Ctx, id: string): StripeObject | undefined {
  return ctx.account.hidden.get(id)?.discount as StripeObject | undefined;
}

function newDiscount(ctx: Ctx, coupon: StripeObject, customer: string, subscription: string): StripeObject {
  const months = coupon.duration === 'repeating' ? (coupon.duration_in_months as number) : null;
  const discount: StripeObject = {
    id: ctx.newId('di'),
    object: 'discount',
    checkout_session: null,
    customer,
    customer_account: null,
    end: months === null ? null : addInterval(ctx.now, 'month', months),
    invoice: null,
    invoice_item: null,
    promotion_code: null,
    source: { coupon: coupon.id, type: 'coupon' },
    start: ctx.now,
    subscription,
    subscription_item: null,
  };
  ctx.account.hidden.set(discount.id, { discount });
  return discount;
}

/**
 * The subscription's discount ids after `v` (the `discounts` parameter; '' removes them all),
 * checked before anything is stored; `emit` then announces what came and went.
 */
export function discountsFor(ctx: Ctx, sub: { id: string; customer: string }, v: Value | undefined, current: string[]): { ids: string[]; emit(): void } {
  if (v === undefined) return { ids: current, emit: () => undefined };
  const wanted = Array.isArray(v) ? v.filter(isHash) : [];
  const kept: string[] = [];
  const coupons: StripeObject[] = [];
  wanted.forEach((d, i) => {
    const existing = str(d.discount);
    if (existing) {
      if (!current.includes(existing)) throw noSuch('discount', existing, `discounts[${i}][discount]`);
      kept.push(existing);
      return;
    }
    if (str(d.promotion_code)) throw noSuch('promotion code', d.promotion_code as string, `discounts[${i}][promotion_code]`);
    const id = str(d.coupon);
    const coupon = id ? ctx.get(COUPONS, id) : undefined;
    if (!coupon) throw noSuch('coupon', id ?? '', `discounts[${i}][coupon]`);
    if (coupon.valid !== true) throw invalidRequest(`Coupon ${coupon.id} is no longer valid.`, { param: `discounts[${i}][coupon]` });
    coupons.push(coupon);
  });
  const made = coupons.map((c) => newDiscount(ctx, c, sub.customer, sub.id));
  const removed = current.filter((id) => !kept.includes(id));
  return {
    ids: [...kept, ...made.map((d) => d.id)],
    emit: () => {
      for (const id of removed) {
        const d = stored(ctx, id);
        if (d) ctx.emit('customer.discount.deleted', d);
      }
      for (const d of made) ctx.emit('customer.discount.created', d);
    },
  };
}
