/**
 * Test-clock time: the objects of a customer on a test clock (the customer, its subscriptions,
 * invoices, invoice items) are dated at the clock's frozen time, their events at real time.
 * Payment intents and charges keep real time, as Stripe's do.
 */
import type { Ctx } from '../context.ts';
import type { StripeObject } from '../store.ts';
import { CUSTOMERS, TEST_CLOCKS } from './names.ts';

/** The test clock a customer lives on, if any. */
export function clockOfCustomer(ctx: Ctx, customerId: string | null | undefined): StripeObject | undefined {
  if (!customerId) return undefined;
  const clockId = ctx.get(CUSTOMERS, customerId)?.test_clock;
  return typeof clockId === 'string' ? ctx.get(TEST_CLOCKS, clockId) : undefined;
}

/** `ctx` as the customer's objects see it: at its clock's frozen time, or unchanged. */
export function customerTime(ctx: Ctx, customerId: string | null | undefined): Ctx {
  const clock = clockOfCustomer(ctx, customerId);
  return clock ? ctx.atTime(clock.frozen_time as number) : ctx;
}

/** The `test_clock` field of an object belonging to this customer. */
export function testClockId(ctx: Ctx, customerId: string | null | undefined): string | null {
  return clockOfCustomer(ctx, customerId)?.id ?? null;
}
