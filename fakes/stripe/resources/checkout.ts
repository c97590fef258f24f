/**
 * Checkout sessions in payment and subscription mode. A session is completed by the buyer in
 * a browser, which the fake cannot host: `completeSession` (the control API's
 * `act('checkout/sessions', id, 'complete')`) stands in for it and leaves what completion leaves.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import { pageOfArray } from '../lists.ts';
import type { Params } from '../params.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { EMPTY_ADDRESS, int, isHash, type Json, mergeMetadata, str } from './common.ts';
import { priceAmount } from './billing.ts';
import { both, crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { newCustomer } from './customers.ts';
import { testCard } from './cards.ts';
import { CHECKOUT_SESSIONS, CUSTOMERS, PAYMENT_INTENTS, PAYMENT_METHODS, PRICES, PRODUCTS } from './names.ts';
import { buildIntent, confirmIntent } from './payment-intents.ts';
import { attachPaymentMethod, newCardPaymentMethod } from './payment-methods.ts';
import { createPrice } from './prices.ts';
import { createSubscription } from './subscriptions.ts';

function lineItems(ctx: Ctx, p: Params, mode: string): Json[] {
  const raw = Array.isArray(p.line_items) ? p.line_items.filter(isHash) : [];
  if (raw.length === 0 && mode !== 'setup') throw missingParam('line_items');
  const items = raw.map((li, i) => {
    let price: StripeObject | undefined;
    if (isHash(li.price_data)) price = createPrice(ctx, { ...li.price_data, active: false }, `line_items[${i}][price_data]`);
    else {
      const id = str(li.price);
      if (!id) throw missingParam(`line_items[${i}][price]`);
      price = ctx.get(PRICES, id);
      if (!price) throw noSuch('price', id, `line_items[${i}][price]`);
    }
    if (mode === 'payment' && price.type === 'recurring') {
      throw invalidRequest('You specified `payment` mode but passed a recurring price. Either switch to `subscription` mode or use only one-time prices.', {
        param: `line_items[${i}][price]`,
      });
    }
    const quantity = int(li.quantity) ?? 1;
    const amount = priceAmount(ctx, price, quantity);
    return {
      id: ctx.newId('li'),
      object: 'item',
      adjustable_quantity: null,
      amount_discount: 0,
      amount_subtotal: amount,
      amount_tax: 0,
      amount_total: amount,
      currency: price.currency,
      description: (ctx.get(PRODUCTS, price.product as string)?.name as string | undefined) ?? null,
      metadata: {},
      price,
      quantity,
    };
  });
  if (mode === 'subscription' && !items.some((li) => (li.price as StripeObject).type === 'recurring')) {
    throw invalidRequest('You must provide at least one recurring price in `subscription` mode when using prices.', { param: 'line_items' });
  }
  return items;
}

/** POST /v1/checkout/sessions. */
export function createSession(ctx: Ctx, params: Params): StripeObject {
  const mode = str(params.mode);
  if (!mode) throw missingParam('mode');
  const customer = str(params.customer) ?? null;
  if (customer && !ctx.get(CUSTOMERS, customer)) throw noSuch('customer', customer, 'customer');
  if (customer && params.customer_email)
    throw invalidRequest('You may only specify one of these parameters: customer, customer_email.', { param: 'customer_email' });
  const uiMode = (params.ui_mode as string | undefined) ?? 'hosted_page';
  if (uiMode === 'hosted_page' && mode !== 'setup' && !str(params.success_url)) throw missingParam('success_url');
  const items = lineItems(ctx, params, mode);
  const total = items.reduce((s, li) => s + (li.amount_total as number), 0);
  const currency = (items[0]?.currency as string | undefined) ?? str(params.currency) ?? null;
  const id = ctx.newId(ctx.livemode ? 'cs_live' : 'cs_test');
  const now = ctx.now;
  const session: StripeObject = {
    id,
    object: 'checkout.session',
    adaptive_pricing: { enabled: false },
    after_expiration: null,
    allow_promotion_codes: typeof params.allow_promotion_codes === 'boolean' ? params.allow_promotion_codes : null,
    amount_subtotal: total,
    amount_total: total,
    automatic_tax: { enabled: false, liability: null, provider: null, status: null },
    billing_address_collection: (params.billing_address_collection as string | undefined) ?? null,
    cancel_url: str(params.cancel_url) ?? null,
    client_reference_id: str(params.client_reference_id) ?? null,
    client_secret: uiMode === 'hosted_page' ? null : `${id}_secret_${ctx.newId('x').slice(-24)}`,
    collected_information: null,
    consent: null,
    consent_collection: null,
    created: now,
    currency,
    currency_conversion: null,
    custom_fields: [],
    custom_text: { after_submit: null, shipping_address: null, submit: null, terms_of_service_acceptance: null },
    customer,
    customer_account: null,
    customer_creation: customer ? null : mode === 'payment' ? ((params.customer_creation as string | undefined) ?? 'if_required') : null,
    customer_details: customer
      ? null
      : str(params.customer_email)
        ? {
            address: null,
            business_name: null,
            email: params.customer_email,
            individual_name: null,
            name: null,
            phone: null,
            tax_exempt: 'none',
            tax_ids: null,
          }
        : null,
    customer_email: str(params.customer_email) ?? null,
    discounts: [],
    expires_at: int(params.expires_at) ?? now + 86_400,
    integration_identifier: null,
    invoice: null,
    invoice_creation:
      mode === 'payment'
        ? {
            enabled: false,
            invoice_data: { account_tax_ids: null, custom_fields: null, description: null, footer: null, issuer: null, metadata: {}, rendering_options: null },
          }
        : null,
    livemode: ctx.livemode,
    locale: (params.locale as string | undefined) ?? null,
    managed_payments: null,
    metadata: mergeMetadata({}, params.metadata),
    mode,
    origin_context: null,
    payment_intent: null,
    payment_link: null,
    payment_method_collection: mode === 'setup' ? null : 'always',
    payment_method_configuration_details: null,
    payment_method_options: { card: { request_three_d_secure: 'automatic' } },
    payment_method_types: Array.isArray(params.payment_method_types) ? params.payment_method_types : ['card'],
    payment_status: mode === 'setup' ? 'no_payment_required' : 'unpaid',
    permissions: null,
    phone_number_collection: { enabled: false },
    recovered_from: null,
    saved_payment_method_options: customer ? { allow_redisplay_filters: ['always'], payment_method_remove: 'disabled', payment_method_save: null } : null,
    setup_intent: null,
    shipping_address_collection: null,
    shipping_cost: null,
    shipping_options: [],
    status: 'open',
    submit_type: (params.submit_type as string | undefined) ?? null,
    subscription: null,
    success_url: str(params.success_url) ?? null,
    total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
    ui_mode: uiMode,
    url: uiMode === 'hosted_page' ? `https://checkout.stripe.com/c/pay/${id}` : null,
    wallet_options: null,
  };
  ctx.account.lineItems.set(id, items as Array<{ id: string }>);
  // Stripe sends no checkout.session.created event.
  return ctx.insert(CHECKOUT_SESSIONS, session, null);
}

/** What the buyer's visit does: pays (payment mode) or subscribes (subscription mode), then completes. */
/**
 * The card the buyer types into Checkout's page. A test card's name stands for a new card of
 * that kind in live mode too, where the API itself refuses the magic ids.
 */
function buyerCard(ctx: Ctx, id: string): string {
  const card = testCard(id);
  if (!card || !ctx.livemode) return id;
  const year = new Date(ctx.clock.nowMs()).getUTCFullYear() + 3;
  return ctx.insert(PAYMENT_METHODS, newCardPaymentMethod(ctx, ctx.newId(PAYMENT_METHODS.prefix), card, year)).id;
}

export function completeSession(ctx: Ctx, session: StripeObject, p: Params): StripeObject {
  if (session.status !== 'open') throw invalidRequest(`This Checkout Session is ${String(session.status)}; only open sessions can be completed.`);
  const pm = buyerCard(ctx, str(p.payment_method) ?? 'pm_card_visa');
  const email = str(p.email) ?? (session.customer_email as string | null) ?? 'buyer@example.com';
  let customerId = session.customer as string | null;
  const needsCustomer = session.mode === 'subscription' || session.customer_creation === 'always';
  if (!customerId && needsCustomer) {
    const c = newCustomer(ctx, ctx.newId(CUSTOMERS.prefix));
    c.email = email;
    c.name = str(p.name) ?? null;
    customerId = ctx.insert(CUSTOMERS, c).id;
  }
  const next: StripeObject = {
    ...session,
    customer: customerId,
    customer_details: {
      address: { ...EMPTY_ADDRESS, country: 'US' },
      business_name: null,
      email,
      individual_name: null,
      name: str(p.name) ?? null,
      phone: null,
      tax_exempt: 'none',
      tax_ids: [],
    },
    payment_status: 'paid',
    status: 'complete',
  };
  const items = (ctx.account.lineItems.get(session.id) ?? []) as Json[];
  if (session.mode === 'payment') {
    const pi = ctx.insert(
      PAYMENT_INTENTS,
      buildIntent(ctx, { amount: session.amount_total as number, currency: session.currency as string, customer: customerId, description: null, metadata: {} }),
    );
    next.payment_intent = confirmIntent(ctx, pi, pm).id;
  } else if (session.mode === 'subscription') {
    const attached = attachPaymentMethod(ctx, pm, customerId as string);
    const customer = ctx.find(CUSTOMERS, customerId as string);
    ctx.save(CUSTOMERS, { ...customer, invoice_settings: { ...(customer.invoice_settings as Json), default_payment_method: attached.id } });
    const sub = createSubscription(ctx, {
      customer: customerId as string,
      // One-time prices in subscription mode would go on the first invoice; the fake leaves them out.
      items: items
        .filter((li) => (li.price as StripeObject).type === 'recurring')
        .map((li) => ({ price: (li.price as StripeObject).id, quantity: li.quantity as number })),
      metadata: {},
    });
    next.subscription = sub.id;
    next.invoice = sub.latest_invoice;
    if (sub.status !== 'active' && sub.status !== 'trialing') next.payment_status = 'unpaid';
  } else next.payment_status = 'no_payment_required';
  return ctx.save(CHECKOUT_SESSIONS, next, 'checkout.session.completed');
}

function expire({ ctx, path }: Call): StripeObject {
  const session = ctx.find(CHECKOUT_SESSIONS, path.session as string, 'session');
  if (session.status !== 'open')
    throw invalidRequest(`Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of "${String(session.status)}".`);
  return ctx.save(CHECKOUT_SESSIONS, { ...session, status: 'expired', url: null }, 'checkout.session.expired');
}

const sessions: ResourceDef = {
  ...CHECKOUT_SESSIONS,
  path: '/v1/checkout/sessions',
  idParam: 'session',
  create: ({ ctx, params }) => createSession(ctx, params),
  update: ({ ctx, params }, current) =>
    ctx.save(CHECKOUT_SESSIONS, { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) }, null),
  filter: ({ params }) => {
    const email = isHash(params.customer_details) ? params.customer_details.email : undefined;
    return both(
      fieldFilter(params, ['customer', 'payment_intent', 'payment_link', 'status', 'subscription']),
      typeof email === 'string' ? (o) => (o.customer_details as Json | null)?.email === email : undefined,
    );
  },
};

export const checkoutRoutes: Route[] = [
  ...crudRoutes(sessions),
  { method: 'POST', template: '/v1/checkout/sessions/{session}/expire', group: CHECKOUT_SESSIONS.group, handler: expire },
  {
    method: 'GET',
    template: '/v1/checkout/sessions/{session}/line_items',
    group: CHECKOUT_SESSIONS.group,
    handler: ({ ctx, params, path }) => {
      const id = path.session as string;
      ctx.find(CHECKOUT_SESSIONS, id, 'session');
      return pageOfArray((ctx.account.lineItems.get(id) ?? []) as Array<{ id: string }>, params, `/v1/checkout/sessions/${id}/line_items`, 'line item');
    },
  },
];
