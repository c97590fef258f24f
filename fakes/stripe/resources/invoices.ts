/**
 * Invoice endpoints: drafts made through the API, their lines, and the lifecycle actions
 * (finalize, pay, void, mark_uncollectible, send); invoice payments as Stripe lists them.
 */
import type { Ctx } from '../context.ts';
import { invalidRequest, missingParam, noSuch } from '../errors.ts';
import { pageOfArray } from '../lists.ts';
import type { Call, Route } from '../routes.ts';
import type { StripeObject } from '../store.ts';
import { customerTime } from './clock-time.ts';
import { int, type Json, mergeMetadata, str } from './common.ts';
import { both, crudRoutes, fieldFilter, type ResourceDef } from './crud.ts';
import { buildInvoice, claimPendingItems, finalizeInvoice, invoiceLines, markPaid, payInvoice, withLines } from './invoice-model.ts';
import { CUSTOMERS, INVOICE_ITEMS, INVOICE_PAYMENTS, INVOICES, SUBSCRIPTIONS } from './names.ts';

function create({ ctx: requestCtx, params }: Call): StripeObject {
  const customerId = str(params.customer);
  if (!customerId) throw missingParam('customer');
  const ctx = customerTime(requestCtx, customerId);
  const customer = ctx.get(CUSTOMERS, customerId);
  if (!customer) throw noSuch('customer', customerId, 'customer');
  const subscriptionId = str(params.subscription);
  const subscription = subscriptionId ? ctx.get(SUBSCRIPTIONS, subscriptionId) : null;
  if (subscriptionId && !subscription) throw noSuch('subscription', subscriptionId, 'subscription');
  const collection = (params.collection_method as string | undefined) ?? 'charge_automatically';
  const daysUntilDue = int(params.days_until_due) ?? null;
  if (collection === 'send_invoice' && daysUntilDue === null && int(params.due_date) === undefined) throw missingParam('days_until_due');
  const invoice = buildInvoice(ctx, {
    customer,
    currency: str(params.currency)?.toLowerCase() ?? (customer.currency as string | null) ?? 'usd',
    billingReason: 'manual',
    collectionMethod: collection,
    subscription,
    autoAdvance: params.auto_advance === true,
    daysUntilDue,
    description: str(params.description) ?? null,
    metadata: mergeMetadata({}, params.metadata),
    defaultPaymentMethod: str(params.default_payment_method) ?? null,
  });
  if (int(params.due_date) !== undefined) invoice.due_date = params.due_date;
  if (str(params.footer)) invoice.footer = params.footer;
  const lines = params.pending_invoice_items_behavior === 'include' ? claimPendingItems(ctx, customer.id, invoice.id, subscription?.id ?? null) : [];
  return ctx.insert(INVOICES, withLines(ctx, invoice, lines));
}

const DRAFT_ONLY = ['auto_advance', 'collection_method', 'days_until_due', 'due_date', 'default_payment_method', 'description', 'footer'];

function update({ ctx, params }: Call, current: StripeObject): StripeObject {
  if (current.status !== 'draft' && DRAFT_ONLY.some((k) => params[k] !== undefined && k !== 'description' && k !== 'footer')) {
    throw invalidRequest('Finalized invoices can only update metadata, description, footer and a few other fields.', { code: 'invoice_not_editable' });
  }
  if (current.status === 'void') throw invalidRequest('You cannot update a voided invoice.', { code: 'invoice_not_editable' });
  const next: StripeObject = { ...current, metadata: mergeMetadata(current.metadata as Record<string, string>, params.metadata) };
  for (const k of DRAFT_ONLY) if (params[k] !== undefined) next[k] = params[k] === '' ? null : params[k];
  if (typeof params.days_until_due === 'number') next.due_date = (current.created as number) + params.days_until_due * 86_400;
  return ctx.save(INVOICES, next);
}

function remove({ ctx }: Call, current: StripeObject): unknown {
  if (current.status !== 'draft') throw invalidRequest('You can only delete draft invoices.', { code: 'invoice_not_editable' });
  if (current.parent !== null) throw invalidRequest("You can't delete invoices created by subscriptions.", { code: 'invoice_not_editable' });
  // Its items go back to pending, as they were before the draft claimed them.
  for (const ii of [...ctx.col(INVOICE_ITEMS.name).values()]) if (ii.invoice === current.id) ctx.save(INVOICE_ITEMS, { ...ii, invoice: null });
  ctx.account.lineItems.delete(current.id);
  return ctx.destroy(INVOICES, current);
}

function action(name: string, states: string[], fn: (call: Call, invoice: StripeObject) => StripeObject): Route {
  return {
    method: 'POST',
    template: `/v1/invoices/{invoice}/${name}`,
    group: INVOICES.group,
    handler: (call) => {
      const invoice = call.ctx.find(INVOICES, call.path.invoice as string, 'invoice');
      if (!states.includes(invoice.status as string)) {
        throw invalidRequest(`You can only ${name.replace('_', ' ')} ${states.join(' or ')} invoices; this invoice is ${String(invoice.status)}.`, {
          code: 'invoice_not_editable',
        });
      }
      // A test-clock customer's invoice changes at the clock's time.
      return fn({ ...call, ctx: customerTime(call.ctx, invoice.customer as string) }, invoice);
    },
  };
}

function transition(ctx: Ctx, invoice: StripeObject, status: string, stamp: string, event: string): StripeObject {
  const transitions = { ...(invoice.status_transitions as Json), [stamp]: ctx.now };
  return ctx.save(
    INVOICES,
    {
      ...invoice,
      status,
      status_transitions: transitions,
      auto_advance: false,
      next_payment_attempt: null,
      amount_remaining: status === 'void' ? 0 : invoice.amount_remaining,
    },
    event,
  );
}

const invoices: ResourceDef = {
  ...INVOICES,
  path: '/v1/invoices',
  idParam: 'invoice',
  create,
  update,
  remove,
  filter: ({ params }) =>
    both(
      fieldFilter(params, ['customer', 'status', 'collection_method']),
      typeof params.subscription === 'string'
        ? (o) => (o.parent as { subscription_details?: { subscription: string } } | null)?.subscription_details?.subscription === params.subscription
        : undefined,
    ),
};

const invoicePayments: ResourceDef = {
  ...INVOICE_PAYMENTS,
  path: '/v1/invoice_payments',
  idParam: 'invoice_payment',
  filter: ({ params }) =>
    both(
      fieldFilter(params, ['invoice', 'status']),
      params.payment && typeof params.payment === 'object' && !Array.isArray(params.payment)
        ? (o) => Object.entries(params.payment as Json).every(([k, v]) => (o.payment as Json)[k] === v)
        : undefined,
    ),
};

export const invoiceRoutes: Route[] = [
  ...crudRoutes(invoices),
  ...crudRoutes(invoicePayments),
  {
    method: 'GET',
    template: '/v1/invoices/{invoice}/lines',
    group: INVOICES.group,
    handler: ({ ctx, params, path }) => {
      const id = path.invoice as string;
      ctx.find(INVOICES, id, 'invoice');
      return pageOfArray(invoiceLines(ctx, id) as Array<{ id: string }>, params, `/v1/invoices/${id}/lines`, 'invoice line item');
    },
  },
  action('finalize', ['draft'], ({ ctx }, invoice) => finalizeInvoice(ctx, invoice)),
  action('pay', ['open'], ({ ctx, params }, invoice) => {
    if (params.paid_out_of_band === true) return markPaid(ctx, invoice, null, true);
    return payInvoice(ctx, invoice, str(params.payment_method));
  }),
  action('void', ['open'], ({ ctx }, invoice) => transition(ctx, invoice, 'void', 'voided_at', 'invoice.voided')),
  action('mark_uncollectible', ['open'], ({ ctx }, invoice) =>
    transition(ctx, invoice, 'uncollectible', 'marked_uncollectible_at', 'invoice.marked_uncollectible'),
  ),
  action('send', ['open'], ({ ctx }, invoice) => {
    ctx.emit('invoice.sent', invoice);
    return invoice;
  }),
];
