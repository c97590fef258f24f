/**
 * Upcoming invoices, keyed by customer or subscription (docs/stripe.md "Upcoming invoices"):
 * each live subscription's preview, and each customer's, which Stripe wants narrowed to a
 * subscription (the customer's newest live one); no preview, no row.
 *
 * A preview is a computation, not a stored object. Two things in it are new at each
 * computation, and are compared for their form only:
 * - its identity: `upcoming_in_…` and the `il_tmp_…` ids of its lines;
 * - the times Stripe takes from "now" (the dates of a preview with no subscription, a
 *   send_invoice due date): a row fetched some time before the check holds them that much
 *   earlier. All of a row's differing times must then be earlier by one and the same amount.
 */
import type pg from 'pg';
import type { FakeStripeAccount, StripeObject } from '../../fakes/stripe/index.ts';
import type { Violation } from '../types.ts';
import { compareRows, type DbColumn, rowsOf, sameValue, TableViolations } from './normalize.ts';
import { expectedRow, expectedTables, type Row, UPCOMING_TABLES } from './stripe-expected.ts';

type Kind = keyof typeof UPCOMING_TABLES;

const LIVE = (s: StripeObject) => s.status !== 'canceled' && s.status !== 'incomplete_expired';

/** A preview as POST /v1/invoices/create_preview answers it, or undefined when it refuses. */
function preview(account: FakeStripeAccount, params: Record<string, string>): StripeObject | undefined {
  try {
    return account.create('invoices/create_preview', params);
  } catch {
    return undefined;
  }
}

/** Every candidate row per key: a customer's newest live subscriptions may share their second. */
function upcomingExpected(account: FakeStripeAccount, kind: Kind): Map<string, Row[]> {
  const { table: name, key } = UPCOMING_TABLES[kind];
  const table = expectedTables().get(name)!;
  const out = new Map<string, Row[]>();
  const subscriptions = account.all('subscriptions');
  if (kind === 'subscription') {
    for (const sub of subscriptions) {
      const p = preview(account, { subscription: sub.id });
      if (p) out.set(sub.id, [expectedRow(table, p, { [key]: sub.id })]);
    }
    return out;
  }
  for (const customer of account.all('customers')) {
    const direct = preview(account, { customer: customer.id });
    if (direct) {
      out.set(customer.id, [expectedRow(table, direct, { [key]: customer.id })]);
      continue;
    }
    const live = subscriptions.filter((s) => s.customer === customer.id && LIVE(s));
    const newest = Math.max(...live.map((s) => s.created as number));
    const candidates = live
      .filter((s) => s.created === newest)
      .map((s) => preview(account, { customer: customer.id, subscription: s.id }))
      .filter((p): p is StripeObject => p !== undefined)
      .map((p) => expectedRow(table, p, { [key]: customer.id }));
    if (candidates.length > 0) out.set(customer.id, candidates);
  }
  return out;
}

/** A preview's identity, in any value: the same placeholder on both sides. */
function maskIds(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(/\b(upcoming_in|il_tmp)_[0-9A-Za-z]+/g, '$1_*');
  if (Array.isArray(value)) return value.map(maskIds);
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskIds(v)]));
  }
  return value;
}

const timeOf = (v: unknown) => (v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : NaN);

/**
 * The expected row as of the row's own computation: when every time that differs is earlier
 * in the database by one same positive amount, the expected times are moved back by it.
 */
function asOfComputation(columns: DbColumn[], have: Row, want: Row): Row {
  const shifts = new Set<number>();
  for (const c of columns) {
    if (c.type !== 'timestamptz' || sameValue(c.type, have[c.name], want[c.name])) continue;
    shifts.add(timeOf(want[c.name]) - timeOf(have[c.name]));
  }
  const [shift] = shifts;
  if (shifts.size !== 1 || !(shift! > 0)) return want;
  const moved = { ...want };
  for (const c of columns) {
    if (c.type === 'timestamptz' && want[c.name] !== null) moved[c.name] = new Date(timeOf(want[c.name]) - shift!).toISOString();
  }
  return moved;
}

export async function checkUpcoming(
  db: pg.Client,
  account: FakeStripeAccount,
  kind: Kind,
  columns: DbColumn[],
  cap: number | undefined,
  out: Violation[],
): Promise<void> {
  const { table: name, key } = UPCOMING_TABLES[kind];
  const report = new TableViolations(name, cap);
  const rows = new Map([...(await rowsOf(db, 'public', name, key, columns))].map(([id, row]) => [id, maskIds(row) as Row]));
  // Keys still waiting for their refetch (readable with the admin URL only).
  const queued = new Set<string>();
  try {
    const { rows: due } = await db.query<{ id: string }>('SELECT id FROM public_swap._stripe_upcoming_due WHERE kind = $1', [kind]);
    for (const d of due) queued.add(d.id);
  } catch {
    // the reader cannot see public_swap
  }
  // Of several equally right previews, the one the row is closest to.
  const chosen = new Map<string, Row>();
  for (const [id, candidates] of upcomingExpected(account, kind)) {
    const row = rows.get(id);
    const fitted = candidates.map((c) => maskIds(c) as Row).map((c) => (row ? asOfComputation(columns, row, c) : c));
    const differences = (c: Row) => (row ? columns.filter((col) => !sameValue(col.type, row[col.name], c[col.name])).length : 0);
    chosen.set(
      id,
      fitted.reduce((best, c) => (differences(c) < differences(best) ? c : best)),
    );
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
