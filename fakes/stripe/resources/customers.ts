/**
 * Customers: CRUD; deleting cancels their subscriptions and leaves a `deleted: true` stub. A
 * customer made with `test_clock` lives on that clock (created at its frozen time) and, as in
 * Stripe, only lists that ask for `test_clock` show it.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, noSuch } from '../errors.ts';
import type { Params, Value } from '../params.ts';
import type { Call } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { address, assignNullable, int, isHash, type Json, mergeMetadata, shipping, str } from './common.ts';
import { both, crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { CUSTOMERS, PAYMENT_METHODS, TEST_CLOCKS } from './names.ts';
import { testCard } from './cards.ts';
import { attachPaymentMethod } from './payment-methods.ts';
import { cancelSubscription } from './subscriptions.ts';

export function invoicePrefix(ctx: Ctx): string {
  return ctx
    .newId('x')
    .slice(-8)
    .toUpperCase()
    .replace(/[^0-9A-Z]/g, '0');
}

function invoiceSettings(v: Params[string] | undefined, current: Json): Json {
  if (!isHash(v)) return current;
  const next: Json = { ...current };
  if (v.custom_fields !== undefined) next.custom_fields = v.custom_fields === '' ? null : v.custom_fields;
  if (v.default_payment_method !== undefined) next.default_payment_method = v.default_payment_method === '' ? null : v.default_payment_method;
  if (v.footer !== undefined) next.footer = v.footer === '' ? null : v.footer;
  if (v.rendering_options !== undefined) {
    next.rendering_options = isHash(v.rendering_options) ? { amount_tax_display: null, template: null, ...v.rendering_options } : null;
  }
  return next;
}

function checkDefaultPaymentMethod(ctx: Ctx, customerId: string, settings: Json): void {
  const pm = settings.default_payment_method;
  if (typeof pm !== 'string') return;
  const found = ctx.get(PAYMENT_METHODS, pm);
  if (!found) throw noSuch('PaymentMethod', pm, 'invoice_settings[default_payment_method]');
  if (found.customer !== customerId) {
    throw invalidRequest(`The customer does not have a payment method with the ID ${pm}. The payment method must be attached to the customer.`, {
      param: 'invoice_settings[default_payment_method]',
    });
  }
}

function applyParams(_ctx: Ctx, current: StripeObject, p: Params): StripeObject {
  const next: StripeObject = { ...current };
  assignNullable(next, p, ['description', 'email', 'name', 'phone']);
  for (const k of ['business_name', 'individual_name'] as const) {
    if (p[k] === '') delete next[k];
    else if (typeof p[k] === 'string') next[k] = p[k];
  }
  if (p.address !== undefined) next.address = address(p.address, current.address as Json | null);
  if (p.shipping !== undefined) next.shipping = shipping(p.shipping, current.shipping as Json | null);
  if (int(p.balance) !== undefined) next.balance = p.balance;
  if (str(p.invoice_prefix)) next.invoice_prefix = (p.invoice_prefix as string).toUpperCase();
  if (int(p.next_invoice_sequence) !== undefined) next.next_invoice_sequence = p.next_invoice_sequence;
  if (Array.isArray(p.preferred_locales)) next.preferred_locales = p.preferred_locales;
  else if (p.preferred_locales === '') next.preferred_locales = [];
  if (typeof p.tax_exempt === 'string') next.tax_exempt = p.tax_exempt === '' ? 'none' : p.tax_exempt;
  if (p.invoice_settings !== undefined) next.invoice_settings = invoiceSettings(p.invoice_settings, current.invoice_settings as Json);
  if (p.default_source !== undefined) next.default_source = p.default_source === '' ? null : p.default_source;
  next.metadata = mergeMetadata(current.metadata as Record<string, string>, p.metadata);
  return next;
}

export function newCustomer(ctx: Ctx, id: string): StripeObject {
  return {
    id,
    object: 'customer',
    address: null,
    balance: 0,
    created: ctx.now,
    currency: null,
    customer_account: null,
    default_source: null,
    delinquent: false,
    description: null,
    discount: null,
    email: null,
    invoice_prefix: invoicePrefix(ctx),
    invoice_settings: { custom_fields: null, default_payment_method: null, footer: null, rendering_options: null },
    livemode: ctx.livemode,
    metadata: {},
    name: null,
    next_invoice_sequence: 1,
    phone: null,
    preferred_locales: [],
    shipping: null,
    tax_exempt: 'none',
    test_clock: null,
  };
}

function create({ ctx, params }: Call): StripeObject {
  const pm = str(params.payment_method);
  // Checked before anything is stored: a failing request leaves no customer behind.
  if (pm && !testCard(pm)) {
    const found = ctx.get(PAYMENT_METHODS, pm);
    if (!found) throw noSuch('PaymentMethod', pm, 'payment_method');
    if (found.customer !== null)
      throw invalidRequest('The payment method you provided has already been attached to a customer.', {
        code: 'payment_method_unexpected_state',
        param: 'payment_method',
      });
  }
  const wantedDefault = isHash(params.invoice_settings) ? str(params.invoice_settings.default_payment_method) : undefined;
  if (wantedDefault && wantedDefault !== pm) {
    throw invalidRequest(`The customer does not have a payment method with the ID ${wantedDefault}. The payment method must be attached to the customer.`, {
      param: 'invoice_settings[default_payment_method]',
    });
  }
  const clockId = str(params.test_clock);
  const clock = clockId ? ctx.get(TEST_CLOCKS, clockId) : undefined;
  if (clockId && !clock) throw noSuch('test_clock', clockId, 'test_clock');
  // The default can only be set once the payment method is attached, after the customer exists.
  const settings = isHash(params.invoice_settings) ? { ...params.invoice_settings } : undefined;
  if (settings) delete settings.default_payment_method;
  const at = clock ? ctx.atTime(clock.frozen_time as number) : ctx;
  const base = { ...newCustomer(at, ctx.newId(CUSTOMERS.prefix)), test_clock: clock?.id ?? null };
  const customer = at.insert(CUSTOMERS, applyParams(ctx, base, settings ? { ...params, invoice_settings: settings } : params));
  if (!pm) return customer;
  const attached = attachPaymentMethod(ctx, pm, customer.id, 'payment_method');
  if (!wantedDefault) return customer;
  return ctx.save(CUSTOMERS, {
    ...customer,
    invoice_settings: invoiceSettings(
      { ...(params.invoice_settings as Record<string, Value>), default_payment_method: attached.id },
      customer.invoice_settings as Json,
    ),
  });
}

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  const next = applyParams(ctx, current, params);
  checkDefaultPaymentMethod(ctx, current.id, next.invoice_settings as Json);
  return ctx.save(CUSTOMERS, next);
}

function remove({ ctx }: Call, current: StripeObject): unknown {
  for (const sub of [...ctx.col('subscriptions').values()]) {
    if (sub.customer === current.id && sub.status !== 'canceled' && sub.status !== 'incomplete_expired') cancelSubscription(ctx, sub, {});
  }
  return ctx.destroy(CUSTOMERS, current);
}

function retrieve({ ctx }: Call, id: string): unknown {
  const entry = ctx.col(CUSTOMERS.name).entry(id);
  if (!entry) throw noSuch('customer', id);
  if (entry.deleted) return { id, object: 'customer', deleted: true };
  return entry.obj;
}

export const customers: ResourceDef = {
  ...CUSTOMERS,
  path: '/v1/customers',
  idParam: 'customer',
  create,
  update,
  remove,
  retrieve,
  // Without `test_clock`, Stripe's list leaves out customers on test clocks.
  filter: ({ params }) =>
    both(fieldFilter(params, ['email']), typeof params.test_clock === 'string' ? (o) => o.test_clock === params.test_clock : (o) => !o.test_clock),
};

export const customerRoutes = crudRoutes(customers);

/** The customer's currency is set by its first priced object and never changes after. */
export function fixCurrency(ctx: Ctx, customerId: string, currency: string, param = 'currency'): void {
  const c = ctx.get(CUSTOMERS, customerId);
  if (!c) return;
  if (c.currency === null) ctx.save(CUSTOMERS, { ...c, currency });
  else if (c.currency !== currency) {
    throw invalidRequest(
      `You cannot combine currencies on a single customer. This customer has had a subscription, coupon, or invoice item with currency ${c.currency}`,
      { param },
    );
  }
}
