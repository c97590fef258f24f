/**
 * An invoice's life: drafted with lines, finalized (numbered, open), paid through a payment
 * intent or out of band, voided, uncollectible. Shared by the invoice endpoints, subscriptions
 * and checkout; every step leaves Stripe's events.
 */
import type { Ctx } from '../context.ts';
import { StripeApiError } from '../errors.ts';
import type { StripeObject } from '../store.ts';
import { embeddedList, type Json } from './common.ts';
import { invoiceItemLine, sumAmounts } from './billing.ts';
import { CUSTOMERS, INVOICE_ITEMS, INVOICE_PAYMENTS, INVOICES, PAYMENT_INTENTS } from './names.ts';
import { buildIntent, confirmIntent } from './payment-intents.ts';

export interface InvoiceInput {
  customer: StripeObject;
  currency: string;
  billingReason: string;
  collectionMethod: string;
  subscription?: StripeObject | null;
  autoAdvance: boolean;
  daysUntilDue?: number | null;
  description?: string | null;
  metadata?: Record<string, string>;
  defaultPaymentMethod?: string | null;
  /** Preview invoices take another id shape and never get stored. */
  id?: string;
}

export function customerFields(customer: StripeObject): Json {
  return {
    customer_address: customer.address,
    customer_email: customer.email,
    customer_name: customer.name,
    customer_phone: customer.phone,
    customer_shipping: customer.shipping,
    customer_tax_exempt: customer.tax_exempt,
    customer_tax_ids: [],
  };
}

export function buildInvoice(ctx: Ctx, i: InvoiceInput): StripeObject {
  const id = i.id ?? ctx.newId(INVOICES.prefix);
  const now = ctx.now;
  const sub = i.subscription ?? null;
  return {
    id,
    object: 'invoice',
    account_country: 'US',
    account_name: 'Example Shop',
    account_tax_ids: null,
    amount_due: 0,
    amount_overpaid: 0,
    amount_paid: 0,
    amount_paid_off_stripe: 0,
    amount_remaining: 0,
    amount_shipping: 0,
    application: null,
    attempt_count: 0,
    attempted: false,
    auto_advance: i.autoAdvance,
    automatic_tax: { disabled_reason: null, enabled: false, liability: null, provider: null, status: null },
    automatically_finalizes_at: i.autoAdvance && !sub ? now + 3600 : null,
    billing_reason: i.billingReason,
    collection_method: i.collectionMethod,
    created: now,
    currency: i.currency,
    custom_fields: null,
    customer: i.customer.id,
    customer_account: null,
    ...customerFields(i.customer),
    default_payment_method: i.defaultPaymentMethod ?? null,
    default_source: null,
    default_tax_rates: [],
    description: i.description ?? null,
    discounts: [],
    due_date: null,
    effective_at: null,
    ending_balance: null,
    footer: null,
    from_invoice: null,
    hosted_invoice_url: null,
    invoice_pdf: null,
    issuer: { type: 'self' },
    last_finalization_error: null,
    latest_revision: null,
    lines: embeddedList([], `/v1/invoices/${id}/lines`),
    livemode: ctx.livemode,
    metadata: i.metadata ?? {},
    next_payment_attempt: null,
    number: null,
    on_behalf_of: null,
    parent: sub ? { quote_details: null, subscription_details: { metadata: sub.metadata, subscription: sub.id }, type: 'subscription_details' } : null,
    payment_settings: { default_mandate: null, payment_method_options: null, payment_method_types: null },
    period_end: now,
    period_start: now,
    post_payment_credit_notes_amount: 0,
    pre_payment_credit_notes_amount: 0,
    receipt_number: null,
    rendering: { amount_tax_display: null, pdf: { page_size: 'auto' }, template: null, template_version: null },
    shipping_cost: null,
    shipping_details: null,
    starting_balance: 0,
    statement_descriptor: null,
    status: 'draft',
    status_transitions: { finalized_at: null, marked_uncollectible_at: null, paid_at: null, voided_at: null },
    subtotal: 0,
    subtotal_excluding_tax: 0,
    test_clock: (i.customer.test_clock as string | null | undefined) ?? null,
    total: 0,
    total_discount_amounts: [],
    total_excluding_tax: 0,
    total_pretax_credit_amounts: [],
    total_taxes: [],
    webhooks_delivered_at: null,
    ...(i.daysUntilDue != null ? { due_date: now + i.daysUntilDue * 86_400 } : {}),
  };
}

const EMBEDDED_LINES = 10;

/** The invoice with these lines (kept whole for /lines) and the totals they make. */
export function withLines(ctx: Ctx, invoice: StripeObject, lines: Json[], store = true): StripeObject {
  if (store) ctx.account.lineItems.set(invoice.id, lines as Array<{ id: string }>);
  const total = sumAmounts(lines);
  const paid = invoice.amount_paid as number;
  return {
    ...invoice,
    amount_due: total,
    amount_remaining: Math.max(0, total - paid),
    lines: embeddedList(lines.slice(0, EMBEDDED_LINES), `/v1/invoices/${invoice.id}/lines`, lines.length > EMBEDDED_LINES),
    subtotal: total,
    subtotal_excluding_tax: total,
    total,
    total_excluding_tax: total,
  };
}

export function invoiceLines(ctx: Ctx, invoiceId: string): Json[] {
  return (ctx.account.lineItems.get(invoiceId) as Json[] | undefined) ?? [];
}

/** Pulls the customer's pending invoice items onto a draft (those tied to another subscription stay). */
export function claimPendingItems(ctx: Ctx, customerId: string, invoiceId: string, subscriptionId: string | null): Json[] {
  const lines: Json[] = [];
  for (const ii of [...ctx.col(INVOICE_ITEMS.name).values()]) {
    if (ii.customer !== customerId || ii.invoice !== null) continue;
    const parent = ii.parent as { subscription_details?: { subscription: string } } | null;
    const owner = parent?.subscription_details?.subscription ?? null;
    if (owner !== null && owner !== subscriptionId) continue;
    const attached = ctx.save(INVOICE_ITEMS, { ...ii, invoice: invoiceId });
    lines.push(invoiceItemLine(ctx, attached, ctx.newId('il'), invoiceId));
  }
  return lines;
}

export function nextNumber(ctx: Ctx, customerId: string): string {
  const customer = ctx.find(CUSTOMERS, customerId);
  const seq = customer.next_invoice_sequence as number;
  // The sequence moves silently: Stripe sends no customer.updated for it.
  ctx.save(CUSTOMERS, { ...customer, next_invoice_sequence: seq + 1 }, null);
  return `${String(customer.invoice_prefix)}-${String(seq).padStart(4, '0')}`;
}

/** What finalizing sets: number, URLs, dates. */
export function finalizedFields(ctx: Ctx, invoice: StripeObject, number: string): Json {
  const now = ctx.now;
  const secret = ctx.newId('x').slice(-24);
  const mode = ctx.livemode ? 'live' : 'test';
  return {
    auto_advance: invoice.collection_method === 'charge_automatically' ? invoice.auto_advance : false,
    automatically_finalizes_at: null,
    effective_at: now,
    ending_balance: 0,
    hosted_invoice_url: `https://invoice.stripe.com/i/${ctx.account.id}/${mode}_${secret}`,
    invoice_pdf: `https://pay.stripe.com/invoice/${ctx.account.id}/${mode}_${secret}/pdf?s=ap`,
    next_payment_attempt: invoice.collection_method === 'charge_automatically' && (invoice.amount_due as number) > 0 ? now + 3600 : null,
    number,
    status: 'open',
    status_transitions: { ...(invoice.status_transitions as Json), finalized_at: now },
    webhooks_delivered_at: now,
  };
}

/** draft → open: numbered, given its URLs; a zero invoice is paid at once. */
export function finalizeInvoice(ctx: Ctx, invoice: StripeObject): StripeObject {
  const open = ctx.save(INVOICES, { ...invoice, ...finalizedFields(ctx, invoice, nextNumber(ctx, invoice.customer as string)) }, 'invoice.finalized');
  return (open.amount_due as number) === 0 ? markPaid(ctx, open, null) : open;
}

export function invoicePayment(ctx: Ctx, invoice: StripeObject, pi: StripeObject, amount: number): StripeObject {
  return {
    id: ctx.newId(INVOICE_PAYMENTS.prefix),
    object: 'invoice_payment',
    amount_paid: amount,
    amount_requested: amount,
    created: ctx.now,
    currency: invoice.currency,
    invoice: invoice.id,
    is_default: true,
    livemode: ctx.livemode,
    payment: { payment_intent: pi.id, type: 'payment_intent' },
    status: 'paid',
    status_transitions: { canceled_at: null, paid_at: ctx.now },
  };
}

/** open → paid; with the payment intent that paid it (null: nothing to pay, or paid out of band). */
export function markPaid(ctx: Ctx, invoice: StripeObject, pi: StripeObject | null, outOfBand = false): StripeObject {
  const amount = invoice.amount_remaining as number;
  if (pi) ctx.insert(INVOICE_PAYMENTS, invoicePayment(ctx, invoice, pi, amount), 'invoice_payment.paid');
  const paid = ctx.save(
    INVOICES,
    {
      ...invoice,
      amount_paid: (invoice.amount_paid as number) + amount,
      amount_paid_off_stripe: outOfBand ? amount : (invoice.amount_paid_off_stripe as number),
      amount_remaining: 0,
      attempted: invoice.attempted || pi !== null,
      attempt_count: (invoice.attempt_count as number) + (pi ? 1 : 0),
      auto_advance: false,
      next_payment_attempt: null,
      status: 'paid',
      status_transitions: { ...(invoice.status_transitions as Json), paid_at: ctx.now },
    },
    'invoice.paid',
  );
  if (pi) ctx.emit('invoice.payment_succeeded', paid);
  return paid;
}

/**
 * Charges an open invoice with `paymentMethod` (else its or the customer's default). A decline
 * is recorded on the invoice (invoice.payment_failed, with `onFailure`'s fields: automatic
 * retries set the next attempt there) and rethrown as Stripe's 402.
 */
export function payInvoice(ctx: Ctx, invoice: StripeObject, paymentMethod?: string, onFailure: Json = {}): StripeObject {
  if ((invoice.amount_remaining as number) === 0) return markPaid(ctx, invoice, null);
  const customer = ctx.find(CUSTOMERS, invoice.customer as string);
  const settings = customer.invoice_settings as Json;
  const pm = paymentMethod ?? (invoice.default_payment_method as string | null) ?? (settings.default_payment_method as string | null) ?? undefined;
  const reason =
    invoice.billing_reason === 'subscription_create'
      ? 'Subscription creation'
      : invoice.billing_reason === 'subscription_cycle'
        ? 'Subscription cycle'
        : 'Payment for Invoice';
  if (!pm) {
    ctx.save(INVOICES, { ...invoice, attempted: true, attempt_count: (invoice.attempt_count as number) + 1, ...onFailure }, 'invoice.payment_failed');
    throw new StripeApiError(
      400,
      'invalid_request_error',
      'This customer has no attached payment source or default payment method. Please consider adding a default payment method. For more information, visit https://stripe.com/docs/billing/subscriptions/payment-methods-setting#payment-method-priority.',
    );
  }
  // Test-clock invoices are dated at the clock's time, their payment intents and charges in real time.
  const payCtx = ctx.realTime();
  const pi = payCtx.insert(
    PAYMENT_INTENTS,
    buildIntent(payCtx, { amount: invoice.amount_remaining as number, currency: invoice.currency as string, customer: customer.id, description: reason }),
  );
  try {
    const succeeded = confirmIntent(payCtx, pi, pm);
    return markPaid(ctx, ctx.find(INVOICES, invoice.id), succeeded);
  } catch (e) {
    if (e instanceof StripeApiError && e.status === 402) {
      const current = ctx.find(INVOICES, invoice.id);
      ctx.save(INVOICES, { ...current, attempted: true, attempt_count: (current.attempt_count as number) + 1, ...onFailure }, 'invoice.payment_failed');
    }
    throw e;
  }
}
