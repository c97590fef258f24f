/**
 * The "database equals upstream" invariant for a Stripe sync, checked once traffic has
 * quiesced and the sync has caught up (events feed read, upcoming-invoice queue drained):
 *
 * - Tables: every table of stripeTables() (the catalog's, plus the two upcoming-invoice tables)
 *   exists in `public` with its columns and types.
 * - Objects: each catalog table holds exactly the account's live objects of its type (a
 *   deleted object is absent; a canceled subscription stays), and in each row every column is
 *   what rowOf() (src/stripe/tables.ts, the code the sync itself writes with) makes of the
 *   object, compared up to representation only (see normalize.ts).
 * - Upcoming invoices: the keys, and the columns of a preview that do not change from one
 *   computation to the next (see checkUpcoming).
 *
 * Which account objects a table should hold: the catalog's lists (as the backfill reads them,
 * store.ts tableOfList) name a resource of the fake by their path (`/v1/checkout/sessions` →
 * `checkout/sessions`); `all(resource)` gives its live objects. Resources the fake does not
 * model answer an empty list over HTTP (fakes/stripe/unmodeled.ts), and `all` of them is
 * empty too: their tables must be empty. Exceptions, each with its reason, in upstreamOf().
 *
 * `databaseUrl` may be the reader's URL; with the admin URL, differences in the upcoming
 * tables also say whether the key is still queued for a refetch.
 */
import pg from 'pg';
import { withClient } from '../../src/db/sql.ts';
import type { FakeStripeAccount, StripeObject } from '../../fakes/stripe/index.ts';
import { type CatalogTable, loadCatalog } from '../../src/stripe/catalog.ts';
import { PARENT_COLUMN, rowOf, stripeTables, type StripeTable, UPCOMING } from '../../src/stripe/tables.ts';
import type { Violation } from '../types.ts';
import { compareRows, type DbColumn, rowsOf, sameValue, TableViolations, tablesOf } from './normalize.ts';

export interface StripeCheckOptions {
  account: FakeStripeAccount;
  databaseUrl: string;
  /** Differences listed per table before a summary line (default 20). */
  cap?: number;
}

type Row = Record<string, unknown>;

interface Upstream {
  /** id → the row the mapping makes of the upstream object. */
  rows: Map<string, Row>;
  /** Database rows whose presence cannot be judged from the control API (not reported as extra). */
  ignoreExtra?: (id: string, row: Row) => boolean;
  /** Columns not compared, with why. */
  skipColumns?: Map<string, string>;
}

/**
 * Fake collections whose name is not their list's path, and which FakeStripeAccount does not
 * translate itself (it does `checkout/sessions` and `plans`).
 */
const COLLECTIONS: Record<string, string> = { 'test_helpers/test_clocks': 'test_clocks' };

/** `/v1/checkout/sessions` → `checkout/sessions`: the name FakeStripeAccount.all() takes. */
const resourceOf = (path: string) => {
  const resource = path.replace(/^\/v1\//, '');
  return COLLECTIONS[resource] ?? resource;
};

/** The account's objects for a catalog table, or why the table is not compared. */
function upstreamOf(account: FakeStripeAccount, catalog: CatalogTable, table: StripeTable): Upstream | { skip: string } {
  const rowsFrom = (objects: StripeObject[]) => new Map(objects.map((o) => [o.id, rowOf(table, o)]));

  // Checkout sessions' line items: the fake keeps them beside the session (not in it; Stripe
  // includes them only on request), and FakeStripeAccount has no way to read them.
  if (catalog.table === 'item') return { skip: "checkout sessions' line items cannot be read through FakeStripeAccount" };

  if (catalog.table === 'line_item') {
    // An invoice's lines: the stored invoice carries the first page of them (`lines`). Where
    // that page is the whole list, the table must hold exactly it; where more follow
    // (has_more), the rest cannot be read through FakeStripeAccount, so those invoices'
    // further rows are not judged.
    const rows = new Map<string, Row>();
    const partial = new Set<string>();
    for (const invoice of account.all('invoices')) {
      const lines = invoice.lines as { data?: StripeObject[]; has_more?: boolean } | undefined;
      for (const line of lines?.data ?? []) rows.set(line.id, rowOf(table, line));
      if (lines?.has_more !== false) partial.add(invoice.id);
    }
    return { rows, ignoreExtra: (_id, row) => typeof row.invoice === 'string' && partial.has(row.invoice) };
  }

  if (catalog.table === 'payment_method') {
    // A payment method created and then neither attached nor used (the next request of a
    // sign-up failed) is named by no event and no object, and Stripe lists payment methods
    // per customer: no sync can know of it. Judged are those attached to a customer, named by
    // a payment_method.* event (a detached one stays, customer null), or named by a payment.
    const idOf = (v: unknown) => (typeof v === 'string' ? v : (v as { id?: string } | null)?.id);
    const named = new Set<string>();
    for (const event of account.events()) if (event.type.startsWith('payment_method.')) named.add(event.data.object.id as string);
    for (const resource of ['charges', 'refunds', 'payment_intents', 'setup_intents']) {
      for (const o of account.all(resource)) {
        for (const ref of [o.payment_method, (o.last_payment_error as { payment_method?: unknown } | null)?.payment_method]) {
          const id = idOf(ref);
          if (id) named.add(id);
        }
      }
    }
    const knowable = account.all('payment_methods').filter((pm) => pm.customer || named.has(pm.id));
    const ids = new Set(knowable.map((pm) => pm.id));
    return { rows: rowsFrom(knowable), ignoreExtra: (id) => !ids.has(id) };
  }

  const topLevel = catalog.lists.find((l) => !l.path.includes('{'));
  // Only lists under a parent's path (/v1/customers/{customer}/tax_ids …): of those the fake
  // models just invoice lines and checkout line items (above); the rest answer empty lists.
  const objects = topLevel ? account.all(resourceOf(topLevel.path)) : [];
  const upstream: Upstream = { rows: rowsFrom(objects) };

  // A child row's link to its parent (_parent_id) depends on which list brought it, which the
  // object does not say. (No table the fake has objects for has one today.)
  if (table.columns.some((c) => c.name === PARENT_COLUMN)) {
    upstream.skipColumns = new Map([[PARENT_COLUMN, 'which parent list brought a row is not part of the object']]);
  }
  return upstream;
}

/**
 * Values the database may legitimately hold other than the mapping of the object as stored:
 * upstream changes that no event carries, so a sync that follows the events feed cannot see them.
 * - A balance transaction's `status` turns from pending to available with time alone (the fake
 *   renders it when read; Stripe has no event for it): `available` is accepted for one stored
 *   as pending.
 * - A customer's `next_invoice_sequence` grows when one of its invoices is numbered, and Stripe
 *   sends no customer.updated for that (nor does the fake): any value not above upstream's is
 *   accepted.
 */
function accept(table: string, column: string, dbValue: unknown, expected: Row): boolean {
  if (table === 'balance_transaction' && column === 'status') return expected.status === 'pending' && dbValue === 'available';
  if (table === 'customer' && column === 'next_invoice_sequence') {
    return dbValue !== null && typeof expected.next_invoice_sequence === 'number' && Number(dbValue) <= expected.next_invoice_sequence;
  }
  return false;
}

const LIVE = (s: StripeObject) => s.status !== 'canceled' && s.status !== 'incomplete_expired';

/** A preview as the API answers POST /v1/invoices/create_preview, or undefined when it refuses. */
function preview(account: FakeStripeAccount, params: Record<string, string>): StripeObject | undefined {
  try {
    return account.create('invoices/create_preview', params);
  } catch {
    return undefined;
  }
}

/**
 * Columns of an upcoming invoice compared: a preview is computed afresh at each request, so its
 * `id`, its lines (`il_tmp_…` ids) and, without a subscription, its dates (`created`,
 * `period_*`, … are "now") differ between two computations of the same upcoming invoice.
 * (`parent` names the subscription: the pinned API version has no top-level `subscription`.)
 */
const UPCOMING_COLUMNS = ['customer', 'parent', 'currency', 'subtotal', 'total', 'amount_due', 'billing_reason', 'collection_method'];

/**
 * Upcoming invoices, derived and keyed by customer or subscription: the product previews each
 * subscription, and each customer (narrowed to its newest live subscription when Stripe asks
 * for one, upcoming.ts previewOf); no preview, no row.
 */
function upcomingExpected(account: FakeStripeAccount, kind: 'customer' | 'subscription'): Map<string, Row[]> {
  const table = stripeTables().get(UPCOMING[kind].table)!;
  const key = UPCOMING[kind].key;
  const out = new Map<string, Row[]>();
  const subscriptions = account.all('subscriptions');
  if (kind === 'subscription') {
    for (const sub of subscriptions) {
      const p = preview(account, { subscription: sub.id });
      if (p) out.set(sub.id, [rowOf(table, p, { [key]: sub.id })]);
    }
    return out;
  }
  for (const customer of account.all('customers')) {
    const direct = preview(account, { customer: customer.id });
    if (direct) {
      out.set(customer.id, [rowOf(table, direct, { [key]: customer.id })]);
      continue;
    }
    // The newest live subscription; subscriptions created in the same second are equally newest.
    const live = subscriptions.filter((s) => s.customer === customer.id && LIVE(s));
    const newest = Math.max(...live.map((s) => s.created as number));
    const candidates = live
      .filter((s) => s.created === newest)
      .map((s) => preview(account, { customer: customer.id, subscription: s.id }))
      .filter((p): p is StripeObject => p !== undefined)
      .map((p) => rowOf(table, p, { [key]: customer.id }));
    if (candidates.length > 0) out.set(customer.id, candidates);
  }
  return out;
}

async function checkUpcoming(db: pg.Client, account: FakeStripeAccount, kind: 'customer' | 'subscription', cap: number | undefined, out: Violation[]): Promise<void> {
  const { table: name, key } = UPCOMING[kind];
  const table = stripeTables().get(name)!;
  const report = new TableViolations(name, cap);
  const columns: DbColumn[] = table.columns.filter((c) => c.name === key || UPCOMING_COLUMNS.includes(c.name));
  const rows = await rowsOf(db, 'public', name, key, columns);
  const expected = upcomingExpected(account, kind);
  // Keys still waiting for their refetch (readable with the admin URL only).
  const queued = new Set<string>();
  try {
    const { rows: due } = await db.query<{ id: string }>('SELECT id FROM public_swap._stripe_upcoming_due WHERE kind = $1', [kind]);
    for (const d of due) queued.add(d.id);
  } catch {
    // the reader cannot see public_swap
  }
  // Of several equally right previews (see upcomingExpected), the one the row is closest to.
  const chosen = new Map<string, Row>();
  for (const [id, candidates] of expected) {
    const row = rows.get(id);
    const differences = (c: Row) => (row ? columns.filter((col) => !sameValue(col.type, row[col.name], c[col.name])).length : 0);
    chosen.set(id, candidates.reduce((best, c) => (differences(c) < differences(best) ? c : best)));
  }
  compareRows({
    label: `${name} ${kind}`,
    report,
    key,
    columns,
    db: rows,
    expected: chosen,
    note: (id) => (queued.has(id) ? ' (still queued for a refetch)' : ''),
  });
  report.into(out);
}

export async function stripeMatchesUpstream(options: StripeCheckOptions): Promise<Violation[]> {
  const { account, cap } = options;
  const out: Violation[] = [];
  const catalog = new Map(loadCatalog().tables.map((t) => [t.table, t]));

  await withClient(options.databaseUrl, async (db: pg.Client) => {
    const inDb = await tablesOf(db, 'public');
    for (const [name, table] of stripeTables()) {
      const report = new TableViolations(`table ${name}`, cap);
      const dbTable = inDb.get(name);
      if (!dbTable) {
        report.add(`table ${name}: missing from the database`);
        report.into(out);
        continue;
      }
      const dbColumns = new Map(dbTable.columns.map((c) => [c.name, c]));
      const compared: DbColumn[] = [];
      for (const column of table.columns) {
        const have = dbColumns.get(column.name);
        if (!have) report.add(`table ${name}: no column ${column.name} (${column.type})`);
        else if (have.type !== column.type) report.add(`table ${name}: column ${column.name} is ${have.type} in the database, ${column.type} in the catalog`);
        else compared.push(have);
      }
      const known = new Set(table.columns.map((c) => c.name));
      for (const column of dbTable.columns) if (!known.has(column.name)) report.add(`table ${name}: column ${column.name} is not in the catalog`);

      const entry = catalog.get(name);
      if (!entry) {
        // The upcoming-invoice tables, checked below.
        report.into(out);
        continue;
      }
      const upstream = upstreamOf(account, entry, table);
      if ('skip' in upstream || !dbColumns.has('id')) {
        report.into(out);
        continue;
      }
      const columns = compared.filter((c) => !upstream.skipColumns?.has(c.name));
      const rows = await rowsOf(db, 'public', name, 'id', columns.some((c) => c.name === 'id') ? columns : [{ name: 'id', type: 'text' }, ...columns]);
      compareRows({
        label: table.object,
        report,
        key: 'id',
        columns,
        db: rows,
        expected: upstream.rows,
        ignoreExtra: upstream.ignoreExtra,
        accept: (column, dbValue, expected) => accept(name, column, dbValue, expected),
      });
      report.into(out);
    }
    for (const kind of ['customer', 'subscription'] as const) {
      if (inDb.has(UPCOMING[kind].table)) await checkUpcoming(db, account, kind, cap, out);
    }
  });
  return out;
}
