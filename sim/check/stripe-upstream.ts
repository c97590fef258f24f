/**
 * The "database equals upstream" invariant for a Stripe sync, checked once traffic has
 * quiesced and the sync has caught up (events feed read, upcoming-invoice queue drained):
 *
 * - Tables: every table stripe-expected.ts derives from the documented rules exists in
 *   `public`, with exactly its columns and their types.
 * - Objects: each table holds exactly the account's live objects of its type as the API shows
 *   them now (a deleted object is absent; a canceled subscription stays), and in each row every
 *   column is the object's field as the documented rules keep it (stripe-expected.ts). `event`
 *   holds every event the API lists, and may keep those it no longer does.
 * - Upcoming invoices: every column of each preview (stripe-upcoming.ts).
 *
 * Nothing here comes from the product's mapping code (src/stripe): a wrong mapping must not
 * agree with itself.
 *
 * Which account objects a table should hold: the object type's top-level list (catalog data)
 * names a resource of the fake by its path (`/v1/checkout/sessions` → `checkout/sessions`).
 * Resources the fake does not model answer an empty list over HTTP (fakes/stripe/unmodeled.ts),
 * and have no objects here either: their tables must be empty. Child-only lists the fake models
 * (an invoice's lines, a checkout session's line items) are read through FakeStripeAccount.lines.
 *
 * `databaseUrl` may be the reader's URL; with the admin URL, differences in the upcoming
 * tables also say whether the key is still queued for a refetch.
 */
import type pg from 'pg';
import { withClient } from '../../src/db/sql.ts';
import type { FakeStripeAccount, StripeObject } from '../../fakes/stripe/index.ts';
import type { Violation } from '../types.ts';
import { compareRows, type DbColumn, rowsOf, TableViolations, tablesOf } from './normalize.ts';
import { type ExpectedTable, expectedRow, expectedTables, listsOf, PARENT_ID, type Row, UPCOMING_TABLES } from './stripe-expected.ts';
import { checkUpcoming } from './stripe-upcoming.ts';

export interface StripeCheckOptions {
  account: FakeStripeAccount;
  databaseUrl: string;
  /** Differences listed per table before a summary line (default 20). */
  cap?: number;
}

/** Fake collections whose name is not their list's path (FakeStripeAccount does `checkout/sessions` and `plans`). */
const COLLECTIONS: Record<string, string> = { 'test_helpers/test_clocks': 'test_clocks' };

/** `/v1/checkout/sessions` → `checkout/sessions`: the name FakeStripeAccount takes. */
const resourceOf = (path: string) => {
  const resource = path.replace(/^\/v1\//, '');
  return COLLECTIONS[resource] ?? resource;
};

const idOf = (v: unknown) => (typeof v === 'string' ? v : (v as { id?: unknown } | null)?.id);

/**
 * Payment methods a sync can know of: attached to a customer (Stripe lists them per customer),
 * named by a payment_method.* event (a detached one stays, customer null), or named by a payment.
 * One created and then neither attached nor used has no event and is in no list
 * (docs/stripe.md "What is replicated?"): its row is not required, but if the database has one
 * it must be right.
 */
function knowablePaymentMethods(account: FakeStripeAccount): Set<string> {
  const named = new Set<string>();
  for (const event of account.events()) if (event.type.startsWith('payment_method.')) named.add(event.data.object.id as string);
  for (const resource of ['charges', 'refunds', 'payment_intents', 'setup_intents']) {
    for (const o of account.all(resource)) {
      const error = (o.last_payment_error ?? o.last_setup_error) as { payment_method?: unknown } | null | undefined;
      for (const ref of [o.payment_method, error?.payment_method]) {
        const id = idOf(ref);
        if (typeof id === 'string') named.add(id);
      }
    }
  }
  for (const pm of account.all('payment_methods')) if (pm.customer) named.add(pm.id);
  return named;
}

/**
 * key → expected row, for the objects upstream has of this table's type, of `account`; `owner`
 * is its id when it is a connected account (its rows carry it), null for the platform itself.
 * `inDb`: the keys the database holds.
 */
function upstreamRows(
  account: FakeStripeAccount,
  table: ExpectedTable,
  inDb: Set<string>,
  owner: string | null,
  rows = new Map<string, Row>(),
): Map<string, Row> {
  const add = (o: StripeObject, extra?: Row) => {
    const row = expectedRow(table, o, extra, owner);
    rows.set(String(row[table.key]), row);
  };
  switch (table.object) {
    case 'line_item':
      for (const invoice of account.all('invoices')) for (const line of account.lines(invoice.id)) add(line);
      return rows;
    case 'item':
      for (const session of account.all('checkout/sessions')) for (const item of account.lines(session.id)) add(item, { [PARENT_ID]: session.id });
      return rows;
    case 'event':
      // Every event the API still lists, and any it has forgotten (past 30 days) that the table kept.
      for (const event of account.events()) add(event as unknown as StripeObject);
      for (const event of account.all('events')) if (inDb.has(event.id)) add(event);
      return rows;
    case 'payment_method': {
      const knowable = knowablePaymentMethods(account);
      for (const pm of account.shown('payment_methods')) if (knowable.has(pm.id) || inDb.has(pm.id)) add(pm);
      return rows;
    }
  }
  const topLevel = listsOf(table.object).find((l) => !l.path.includes('{'));
  if (!topLevel) return rows;
  const objects = account.shown(resourceOf(topLevel.path));
  // Rows listed under a parent that they do not name carry its id, which the object does not
  // say (active entitlements per customer): the fake models none of those; should it start
  // to, this checker has to learn each one's parent.
  if (objects.length > 0 && topLevel.parent && table.columns.some((c) => c.name === PARENT_ID)) {
    throw new Error(`the fake has ${table.object} objects, listed per ${topLevel.parent.table}: the checker does not know their ${PARENT_ID}`);
  }
  for (const o of objects) add(o);
  return rows;
}

/** The table's columns as they should be; reports every difference and returns the columns to compare. */
function checkColumns(table: ExpectedTable, dbColumns: DbColumn[], report: TableViolations): DbColumn[] {
  const have = new Map(dbColumns.map((c) => [c.name, c]));
  const compared: DbColumn[] = [];
  for (const column of table.columns) {
    const db = have.get(column.name);
    if (!db) report.add(`table ${table.name}: no column ${column.name} (${column.type})`);
    else if (db.type !== column.type) report.add(`table ${table.name}: column ${column.name} is ${db.type} in the database, ${column.type} by the rules`);
    else compared.push(db);
  }
  const known = new Set(table.columns.map((c) => c.name));
  for (const column of dbColumns) if (!known.has(column.name)) report.add(`table ${table.name}: column ${column.name} is not a field of ${table.object}`);
  return compared;
}

/**
 * A balance transaction turns from pending to available with time alone, and Stripe sends no
 * event for it: the row keeps the status the sync last read (docs/stripe.md). So a row still
 * `pending` is right where Stripe now shows `available`; any other status must match.
 */
const statusAsLastRead = (column: string, dbValue: unknown, want: Record<string, unknown>) =>
  column === 'status' && dbValue === 'pending' && want.status === 'available';

export async function stripeMatchesUpstream(options: StripeCheckOptions): Promise<Violation[]> {
  const { account, cap } = options;
  const out: Violation[] = [];
  const upcoming = new Set<string>(Object.values(UPCOMING_TABLES).map((u) => u.table));

  await withClient(options.databaseUrl, async (db: pg.Client) => {
    const inDb = await tablesOf(db, 'public');
    for (const [name, table] of expectedTables()) {
      const report = new TableViolations(`table ${name}`, cap);
      const dbTable = inDb.get(name);
      if (!dbTable) {
        report.add(`table ${name}: missing from the database`);
        report.into(out);
        continue;
      }
      const columns = checkColumns(table, dbTable.columns, report);
      if (!columns.some((c) => c.name === table.key)) {
        report.into(out);
        continue;
      }
      if (upcoming.has(name)) {
        report.into(out);
        const kind = name === UPCOMING_TABLES.customer.table ? 'customer' : 'subscription';
        await checkUpcoming(db, account, kind, columns, cap, out);
        continue;
      }
      const rows = await rowsOf(db, 'public', name, table.key, columns);
      // The platform's own objects, then each connected account's (docs/stripe.md "Connected
      // accounts"): a deleted account is no longer among them, so its rows must be gone.
      const expected = upstreamRows(account, table, new Set(rows.keys()), null);
      for (const connected of account.connectedAccounts()) upstreamRows(connected, table, new Set(rows.keys()), connected.id, expected);
      compareRows({
        label: table.object,
        report,
        key: table.key,
        columns,
        db: rows,
        expected,
        accept: name === 'balance_transaction' ? statusAsLastRead : undefined,
      });
      report.into(out);
    }
    for (const name of inDb.keys()) {
      if (!expectedTables().has(name) && name !== '_sync_meta')
        out.push({ check: 'db=upstream', detail: `table ${name}: in the database, but no Stripe table by the rules` });
    }
  });
  return out;
}
