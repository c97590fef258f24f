import type pg from 'pg';
import { upsertRows, deleteRows } from '../writer/upsert.ts';
import { type StripeClient, StripeError, type StripeObject } from './client.ts';
import type { StripeEvent } from './events.ts';
import { rowOf, stripeTables, UPCOMING } from './tables.ts';
import { pause } from '../time.ts';

/**
 * Upcoming invoices have no id and no events of their own: an event that can
 * change one (its customer, subscription, invoice items, invoices) marks it for a refetch.
 * Marks live in the sync database, written with the event's changes, so a crash loses none.
 */
const TOUCHES = /^(customer|invoice|invoiceitem|subscription_schedule|customer\.subscription|customer\.discount)\./;

type Kind = keyof typeof UPCOMING;

function idOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { id?: unknown }).id === 'string') return (value as { id: string }).id;
  return undefined;
}

export async function markUpcoming(tx: pg.ClientBase, events: StripeEvent[]): Promise<void> {
  await markUpcomingOf(
    tx,
    events.filter((e) => TOUCHES.test(e.type)).map((e) => e.data.object),
  );
}

/** The types of the objects those events are about (a subscription's events are `customer.subscription.*`). */
const TOUCHING = new Set(['customer', 'invoice', 'invoiceitem', 'subscription_schedule', 'subscription', 'discount']);

/** Marks the previews that objects written with no event can change (the audit's fixes). */
export async function markUpcomingFor(tx: pg.ClientBase, objects: StripeObject[]): Promise<void> {
  await markUpcomingOf(
    tx,
    objects.filter((o) => TOUCHING.has(o.object as string)),
  );
}

/** The previews of the objects' customers and subscriptions, and a customer's subscriptions'. */
async function markUpcomingOf(tx: pg.ClientBase, objects: StripeObject[]): Promise<void> {
  // Keyed, so that many events about one object (a burst in one read of the feed) mark it
  // once: one INSERT … ON CONFLICT DO UPDATE may not touch a row twice.
  const due = new Map<string, { kind: Kind; id: string }>();
  for (const object of objects) {
    const customer = object.object === 'customer' ? idOf(object.id) : idOf(object.customer);
    const subscription = object.object === 'subscription' ? idOf(object.id) : idOf(object.subscription);
    if (customer) due.set(`customer ${customer}`, { kind: 'customer', id: customer });
    if (subscription) due.set(`subscription ${subscription}`, { kind: 'subscription', id: subscription });
  }
  // A customer's change (its address, its tax ids) shows in its subscriptions' previews too.
  const customers = objects.filter((o) => o.object === 'customer').map((o) => idOf(o.id));
  if (customers.length > 0) {
    await tx.query(
      `INSERT INTO public_swap._stripe_upcoming_due (kind, id)
       SELECT 'subscription', id FROM public.subscription
        WHERE customer = ANY($1::text[]) AND status NOT IN ('canceled', 'incomplete_expired')
       ON CONFLICT (kind, id) DO UPDATE SET marked_at = clock_timestamp()`,
      [customers],
    );
  }
  if (due.size === 0) return;
  await tx.query(
    `INSERT INTO public_swap._stripe_upcoming_due (kind, id)
     SELECT d.kind, d.id FROM jsonb_to_recordset($1::jsonb) AS d(kind text, id text)
     ON CONFLICT (kind, id) DO UPDATE SET marked_at = clock_timestamp()`,
    [JSON.stringify([...due.values()])],
  );
}

/**
 * After a backfill: every live subscription and every customer with one, or with pending
 * items, of the key's own account (connected accounts' previews are not kept).
 */
export async function markAllUpcoming(db: pg.Pool): Promise<void> {
  await db.query(
    `INSERT INTO public_swap._stripe_upcoming_due (kind, id)
     SELECT 'subscription', id FROM public.subscription WHERE status NOT IN ('canceled', 'incomplete_expired') AND stripe_account IS NULL
     UNION SELECT 'customer', customer FROM public.subscription
      WHERE status NOT IN ('canceled', 'incomplete_expired') AND customer IS NOT NULL AND stripe_account IS NULL
     UNION SELECT 'customer', customer FROM public.invoiceitem WHERE invoice IS NULL AND customer IS NOT NULL AND stripe_account IS NULL
     ON CONFLICT DO NOTHING`,
  );
}

/** "Nothing to preview": the row goes. */
const NONE = (error: unknown) =>
  error instanceof StripeError &&
  (error.kind === 'missing' || (error.kind === 'invalid' && /upcoming|preview|no .*invoice/i.test(`${error.code} ${error.message}`)));

/**
 * The preview, or undefined when there is nothing to preview. A customer preview that
 * Stripe wants narrowed to one subscription is asked again for the customer's live one.
 */
async function previewOf(client: StripeClient, db: pg.Pool, kind: Kind, id: string): Promise<StripeObject | undefined> {
  const ask = (params: Record<string, string>) => client.request<StripeObject>('POST', '/v1/invoices/create_preview', params);
  try {
    return await ask({ [kind]: id });
  } catch (error) {
    if (NONE(error)) return undefined;
    if (!(kind === 'customer' && error instanceof StripeError && error.kind === 'invalid' && /subscription/.test(error.message))) throw error;
  }
  const { rows } = await db.query<{ id: string }>(
    "SELECT id FROM public.subscription WHERE customer = $1 AND status NOT IN ('canceled', 'incomplete_expired') ORDER BY created DESC LIMIT 1",
    [id],
  );
  if (rows.length === 0) return undefined;
  try {
    return await ask({ customer: id, subscription: rows[0]!.id });
  } catch (error) {
    if (NONE(error)) return undefined;
    throw error;
  }
}

/** Refetches up to `max` marked upcoming invoices; returns how many were handled. */
export async function refreshUpcoming(client: StripeClient, db: pg.Pool, max = 20, spacingMs = 200): Promise<number> {
  const { rows } = await db.query<{ kind: Kind; id: string; marked_at: string }>(
    'SELECT kind, id, marked_at::text FROM public_swap._stripe_upcoming_due ORDER BY marked_at LIMIT $1',
    [max],
  );
  for (const { kind, id, marked_at } of rows) {
    const table = stripeTables().get(UPCOMING[kind].table)!;
    let preview: StripeObject | undefined;
    try {
      preview = await previewOf(client, db, kind, id);
    } catch (error) {
      // Refused for good (a 4xx): drop the mark, or it would block the queue forever.
      if (!(error instanceof StripeError && ['invalid', 'permission'].includes(error.kind))) throw error;
      await db.query('DELETE FROM public_swap._stripe_upcoming_due WHERE kind = $1 AND id = $2', [kind, id]);
      continue;
    }
    if (preview) await upsertRows(db, table.shape, [rowOf(table, preview, { [UPCOMING[kind].key]: id })]);
    else await deleteRows(db, table.shape, [id]);
    // Previews are a background chore: at most a few a second, so the quota stays with the feed and the clients.
    await pause(spacingMs);
    // Marked again while we fetched: keep it for another round.
    await db.query('DELETE FROM public_swap._stripe_upcoming_due WHERE kind = $1 AND id = $2 AND marked_at = $3::timestamptz', [kind, id, marked_at]);
  }
  return rows.length;
}
