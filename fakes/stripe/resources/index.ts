/** Every modeled endpoint, the fields Stripe includes only on request, and read-time renderers. */
import type { Ctx } from '../context.ts';
import type { Includables } from '../expand.ts';
import { page } from '../lists.ts';
import type { Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { accountRoutes } from './accounts.ts';
import { balanceRoutes } from './balance.ts';
import { chargeRoutes, renderBalanceTransaction } from './charges.ts';
import { checkoutRoutes } from './checkout.ts';
import { embeddedList } from './common.ts';
import { entitlementRoutes, renderFeature } from './entitlements.ts';
import { couponRoutes } from './coupons.ts';
import { customerRoutes } from './customers.ts';
import { disputeRoutes } from './disputes.ts';
import { eventRoutes } from './events.ts';
import { invoiceItemRoutes } from './invoice-items.ts';
import { invoiceRoutes } from './invoices.ts';
import { INVOICE_PAYMENTS, REFUNDS, SUBSCRIPTIONS } from './names.ts';
import { paymentIntentRoutes } from './payment-intents.ts';
import { paymentMethodRoutes } from './payment-methods.ts';
import { payoutRoutes } from './payouts.ts';
import { previewRoutes } from './preview.ts';
import { priceRoutes } from './prices.ts';
import { productRoutes } from './products.ts';
import { refundRoutes } from './refunds.ts';
import { searchRoutes } from './search.ts';
import { subscriptionItemRoutes } from './subscription-items.ts';
import { subscriptionRoutes } from './subscriptions.ts';
import { testClockRoutes } from './test-clocks.ts';
import { webhookEndpointRoutes } from './webhook-endpoints.ts';

export const ROUTES: Route[] = [
  ...customerRoutes,
  ...productRoutes,
  ...priceRoutes,
  ...couponRoutes,
  ...subscriptionRoutes,
  ...subscriptionItemRoutes,
  ...invoiceRoutes,
  ...invoiceItemRoutes,
  ...previewRoutes,
  ...paymentIntentRoutes,
  ...chargeRoutes,
  ...refundRoutes,
  ...paymentMethodRoutes,
  ...checkoutRoutes,
  ...payoutRoutes,
  ...disputeRoutes,
  ...eventRoutes,
  ...searchRoutes,
  ...balanceRoutes,
  ...entitlementRoutes,
  ...testClockRoutes,
  ...accountRoutes,
  ...webhookEndpointRoutes,
];

/** The first page of the objects in `collection` that `filter` keeps, as an embedded list. */
function firstPage(ctx: Ctx, collection: string, url: string, filter: (o: StripeObject) => boolean): unknown {
  const col = ctx.col(collection);
  return page(col.ordered(), { params: {}, url, noun: collection, cursor: (id) => col.entry(id), filter });
}

export const INCLUDABLES: Includables = {
  customer: {
    subscriptions: (ctx, c) => firstPage(ctx, SUBSCRIPTIONS.name, `/v1/customers/${c.id}/subscriptions`, (s) => s.customer === c.id && s.status !== 'canceled'),
    sources: (_ctx, c) => embeddedList([], `/v1/customers/${c.id}/sources`),
    tax_ids: (_ctx, c) => embeddedList([], `/v1/customers/${c.id}/tax_ids`),
    tax: () => ({ automatic_tax: 'unrecognized_location', ip_address: null, location: null, provider: 'stripe' }),
    invoice_credit_balance: () => ({}),
    cash_balance: () => null,
  },
  invoice: {
    payments: (ctx, inv) => firstPage(ctx, INVOICE_PAYMENTS.name, `/v1/invoice_payments?invoice=${inv.id}`, (p) => p.invoice === inv.id),
    confirmation_secret: () => null,
  },
  payment_intent: {
    // The fake keeps no amount line items: an empty, complete list.
    'amount_details.line_items': (_ctx, pi) => embeddedList([], `/v1/payment_intents/${pi.id}/amount_details_line_items`),
  },
  charge: {
    refunds: (ctx, ch) => firstPage(ctx, REFUNDS.name, `/v1/charges/${ch.id}/refunds`, (r) => r.charge === ch.id),
  },
  'checkout.session': {
    line_items: (ctx, s) => {
      const items = ctx.account.lineItems.get(s.id) ?? [];
      return embeddedList(items.slice(0, 10), `/v1/checkout/sessions/${s.id}/line_items`, items.length > 10);
    },
  },
};

/** Fields that change with time alone, computed when an object is read. */
export const RENDERERS: Record<string, (ctx: Ctx, obj: StripeObject) => StripeObject> = {
  balance_transaction: renderBalanceTransaction,
  'entitlements.feature': renderFeature,
};
