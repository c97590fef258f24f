/**
 * Objects Stripe sends no events for, though evented changes make them: the balance
 * transaction a charge, a refund, a payout or a dispute leaves; the payment method a payment
 * was made with without it being attached to a customer (payment_method.* events are about
 * attaching); the children an event carries only the first page of (an invoice's lines past
 * the tenth) or none of (a checkout session's line items). A backfill lists them; after it,
 * only the evented objects that name them can tell the sync they exist.
 *
 * For each page of events, what its objects name and the database does not hold yet is
 * fetched (by id, or the child list whole) before the page's transaction, and written in it
 * with the page's changes and cursor: a crash re-reads the page and fetches again, and
 * writing the same objects twice is harmless.
 */
import type pg from 'pg';
import { unreadable } from './incomplete.ts';
import { type CatalogList, tableForObject } from './catalog.ts';
import type { StripeClient, StripeObject } from './client.ts';
import { retrievePath } from './events.ts';
import { type Change, type ChildList, type ChildListRead, childListsOf, inlineLists } from './store.ts';

/**
 * Fields naming objects that have no events of their own, by the type of the object naming
 * them: an id, or (disputes, issuing) the whole objects. Balance transactions never change
 * but for their status, which time alone moves (pending to available, with no event either).
 * A payment method attached to a customer comes with payment_method.attached; one a payment
 * used unattached (a card given to a payment intent without a customer, one that declined)
 * only through the payment that names it.
 */
const REFERENCES: Record<string, Array<{ path: string; object: string }>> = {
  charge: [bt('balance_transaction'), bt('failure_balance_transaction'), pm('payment_method')],
  refund: [bt('balance_transaction'), bt('failure_balance_transaction'), pm('payment_method')],
  dispute: [bt('balance_transactions')],
  payout: [bt('balance_transaction'), bt('failure_balance_transaction')],
  topup: [bt('balance_transaction')],
  transfer: [bt('balance_transaction')],
  transfer_reversal: [bt('balance_transaction')],
  application_fee: [bt('balance_transaction')],
  fee_refund: [bt('balance_transaction')],
  'issuing.authorization': [bt('balance_transactions')],
  'issuing.transaction': [bt('balance_transaction')],
  'issuing.dispute': [bt('balance_transactions')],
  payment_intent: [pm('payment_method'), pm('last_payment_error.payment_method')],
  setup_intent: [pm('payment_method'), pm('last_setup_error.payment_method')],
  setup_attempt: [pm('payment_method'), pm('setup_error.payment_method')],
};

function bt(path: string) {
  return { path, object: 'balance_transaction' };
}

function pm(path: string) {
  return { path, object: 'payment_method' };
}

/**
 * Child lists events never carry, by the parent's table: a checkout session's line items come
 * only when asked for (the backfill expands them). They can change until the session
 * completes, and its events are mostly that moment, so each event of a session reads them.
 * (A payment intent's amount_details line items are the same case; the fake keeps none, and
 * reading them at each of a payment's several events would cost more than they are worth.)
 */
const NOT_CARRIED: Record<string, string> = {
  checkout_session: '/v1/checkout/sessions/{session}/line_items',
};

/** Requests in flight at once for one page; the quota decides the rate. */
const CONCURRENCY = 4;

export interface Unevented {
  changes: Change[];
  lists: ChildListRead[];
}

/** What a page's changes name that has no events of its own and the database lacks, fetched. */
export async function uneventedOf(client: StripeClient, db: pg.Pool, changes: Change[]): Promise<Unevented> {
  const live = changes.filter((c) => !c.deleted);
  const lists = await readLists(client, live);
  const carried = new Set(live.map((c) => keyOf(String(c.object.object), String(c.object.id))));
  const found = new Map<string, Found>();
  for (const change of live) {
    for (const object of withInlineItems(change.object)) named(object, change.version, carried, found);
  }
  for (const read of lists) for (const item of read.items) named(item, read.version, carried, found);
  const whole = [...found.values()].flatMap((f) => (f.object ? [{ object: f.object, version: f.version }] : []));
  const fetched = await fetchMissing(
    client,
    db,
    [...found.values()].filter((f) => !f.object),
  );
  return { changes: [...whole, ...fetched], lists };
}

/** An object named by the page: given whole (with the version of the change that carried it), or by id only. */
interface Found {
  type: string;
  id: string;
  object?: StripeObject;
  version: number;
}

const keyOf = (type: string, id: string) => `${type}:${id}`;

/** An object and the items of the child lists it carries inline (a fee's refunds name balance transactions too). */
function withInlineItems(object: StripeObject): StripeObject[] {
  const table = typeof object.object === 'string' ? tableForObject(object.object)?.table : undefined;
  return [object, ...(table ? inlineLists(table, object).flatMap((l) => l.items) : [])];
}

/** Adds what `object` names to `found`, except objects the page carries itself (their event says more). */
function named(object: StripeObject, version: number, carried: Set<string>, found: Map<string, Found>): void {
  for (const ref of REFERENCES[String(object.object)] ?? []) {
    for (const value of valuesAt(object, ref.path)) {
      const id = typeof value === 'string' ? value : typeof value.id === 'string' ? value.id : undefined;
      if (!id || !tableForObject(ref.object)) continue;
      const key = keyOf(ref.object, id);
      if (carried.has(key)) continue;
      const whole = typeof value === 'object' && value.object === ref.object ? value : undefined;
      const seen = found.get(key);
      // Of several copies, the newest; a whole copy spares the request.
      if (seen?.object && (!whole || seen.version > version)) continue;
      found.set(key, { type: ref.object, id, version, ...(whole ? { object: whole } : {}) });
    }
  }
}

/** The values at a dotted path: ids, objects, or the items of an array there. */
function valuesAt(object: StripeObject, path: string): Array<string | StripeObject> {
  let value: unknown = object;
  for (const part of path.split('.')) value = value && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
  const values = Array.isArray(value) ? value : [value];
  return values.filter((v): v is string | StripeObject => typeof v === 'string' || (typeof v === 'object' && v !== null));
}

/** Fetches, by id, the named objects the database has no row (nor tombstone) for. */
async function fetchMissing(client: StripeClient, db: pg.Pool, named: Found[]): Promise<Change[]> {
  const wanted: Found[] = [];
  for (const type of new Set(named.map((f) => f.type))) {
    const items = named.filter((f) => f.type === type);
    const { rows } = await db.query<{ id: string }>('SELECT id FROM public_swap._stripe_versions WHERE tbl = $1 AND id = ANY($2::text[])', [
      tableForObject(type)!.table,
      items.map((f) => f.id),
    ]);
    const stored = new Set(rows.map((r) => r.id));
    wanted.push(...items.filter((f) => !stored.has(f.id)));
  }
  const out = await mapLimited(wanted, CONCURRENCY, async ({ type, id }) => {
    const path = retrievePath(type, id);
    if (!path) return undefined;
    const fetchedAt = Date.now();
    const object = await readable(client.request<StripeObject>('GET', path));
    return object && { object, version: fetchedAt };
  });
  return out.filter((c): c is Change => c !== undefined);
}

/** The child lists of the page's objects that events leave incomplete, each read whole once. */
async function readLists(client: StripeClient, changes: Change[]): Promise<ChildListRead[]> {
  const due = new Map<string, { child: ChildList; parentId: string }>();
  for (const change of changes) {
    const table = tableForObject(String(change.object.object))?.table;
    const parentId = change.object.id;
    if (!table || typeof parentId !== 'string') continue;
    const inline = inlineLists(table, change.object);
    for (const list of inline) if (!list.complete) due.set(`${list.child.key} ${parentId}`, { child: list.child, parentId });
    const missing = childListsOf(table).find((c) => c.list.path === NOT_CARRIED[table] && !inline.some((l) => l.child === c && l.complete));
    if (missing) due.set(`${missing.key} ${parentId}`, { child: missing, parentId });
  }
  const reads = await mapLimited([...due.values()], CONCURRENCY, async ({ child, parentId }) => {
    const version = Date.now();
    const items = await readable(wholeList(client, child.list, parentId));
    return items && { child, parentId, items, version };
  });
  return reads.filter((r): r is ChildListRead => r !== undefined);
}

/** Every item of one parent's child list, page by page. */
async function wholeList(client: StripeClient, list: CatalogList, parentId: string): Promise<StripeObject[]> {
  const { pathParam, queryParam } = list.parent!;
  const path = pathParam ? list.path.replace(`{${pathParam}}`, encodeURIComponent(parentId)) : list.path;
  const items: StripeObject[] = [];
  for (let after: string | undefined; ; ) {
    const page = await client.listPage(
      path,
      { ...list.query, ...(queryParam ? { [queryParam]: parentId } : {}), ...(after ? { starting_after: after } : {}) },
      list.paged !== false,
    );
    items.push(...page.data);
    after = page.data.at(-1)?.id;
    if (!page.has_more || !after || list.paged === false) return items;
  }
}

/**
 * The answer, or undefined when it cannot be read: gone since (a deleted parent, whose
 * event follows), or a restricted key without that permission (the backfill skipped the list
 * too). Anything else fails the page, to be read again.
 */
async function readable<T>(request: Promise<T>): Promise<T | undefined> {
  try {
    return await request;
  } catch (error) {
    if (unreadable(error)) return undefined;
    throw error;
  }
}

async function mapLimited<T, R>(items: T[], n: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}
