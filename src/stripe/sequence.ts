/**
 * A customer's `next_invoice_sequence` grows when one of its invoices is numbered, which
 * happens when the invoice is finalized, and Stripe sends no customer.updated for it. So each
 * invoice.finalized fetches its customer again (once per customer per page of events), and the
 * row takes the new sequence with the page.
 */
import { type StripeClient, StripeError, type StripeObject } from './client.ts';
import type { StripeEvent } from './events.ts';
import type { Change } from './store.ts';

const idOf = (v: unknown) =>
  typeof v === 'string' ? v : typeof v === 'object' && v !== null && typeof (v as { id?: unknown }).id === 'string' ? (v as { id: string }).id : undefined;

export async function numberedCustomers(client: StripeClient, events: StripeEvent[]): Promise<Change[]> {
  const customers = new Set<string>();
  for (const event of events) {
    if (event.type !== 'invoice.finalized') continue;
    const id = idOf(event.data.object.customer);
    if (id) customers.add(id);
  }
  const out: Change[] = [];
  for (const id of customers) {
    try {
      const object = await client.request<StripeObject>('GET', `/v1/customers/${encodeURIComponent(id)}`);
      // Versioned as events and proxy writes are, by the end of the second it was read in: a
      // write answered earlier in that second (its version is that second's end) must not win.
      out.push({ object, version: Math.floor(Date.now() / 1000) * 1000 + 999 });
    } catch (error) {
      // Deleted since: its customer.deleted follows.
      if (!(error instanceof StripeError && error.kind === 'missing')) throw error;
    }
  }
  return out;
}
