/**
 * What the database of a Stripe sync should look like, by the checker's own reading of the
 * documented rules (docs/stripe.md "What is replicated?", CONTRACT §6), never by the product's
 * mapping code:
 *
 * - A table per listed object type, named by the object with dots as underscores.
 * - A column per field of the object (`object` itself left out: the table says it), typed by
 *   what Stripe's spec says the field is (sim/check/stripe-fields.json, extracted from the
 *   pinned spec by scripts/stripe-fields.ts) through the docs' type table.
 * - `_parent_id` on child tables whose objects do not name their parent.
 * - `stripe_account` on every table: the connected account an object belongs to, NULL for the
 *   platform's own.
 * - Where ids repeat across accounts (coupons, plans and products, whose ids the caller may
 *   choose, and capabilities, named by what they allow), the key is `_key`: the id, prefixed
 *   with `<account>/` for a connected account's object (a capability: the account it names).
 * - The two upcoming-invoice tables: their key, then the invoice's columns but `id`.
 *
 * Which object types are listed, and under which parents, is catalog data (catalog.json, read
 * as data here).
 */
import { readFileSync } from 'node:fs';

type Json = unknown;
export type Row = Record<string, unknown>;
export type UpstreamObject = { id: string; object: string; [key: string]: unknown };

export interface ExpectedColumn {
  name: string;
  type: string;
  /** The spec's kind of the field (stripe-fields.json); undefined for columns Tributary adds. */
  kind?: string;
}

export interface ExpectedTable {
  name: string;
  object: string;
  key: string;
  /** For a table keyed `_key`: the column naming the account the id belongs to. */
  scope?: string;
  columns: ExpectedColumn[];
}

export interface ListData {
  path: string;
  parent?: { table: string; pathParam?: string; queryParam?: string };
}

interface CatalogData {
  apiVersion: string;
  tables: Array<{ object: string; lists: ListData[] }>;
}

interface FieldsData {
  apiVersion: string;
  objects: Record<string, Record<string, string>>;
}

export const PARENT_ID = '_parent_id';
export const STRIPE_ACCOUNT = 'stripe_account';
export const SCOPED_KEY = '_key';

/** docs/stripe.md "Connected accounts": the tables keyed by account and id, and the field naming the account. */
const SCOPED: Record<string, string> = { coupon: STRIPE_ACCOUNT, plan: STRIPE_ACCOUNT, product: STRIPE_ACCOUNT, capability: 'account' };

export const UPCOMING_TABLES = {
  customer: { table: 'upcoming_customer_invoice', key: 'customer_id' },
  subscription: { table: 'upcoming_subscription_invoice', key: 'subscription_id' },
} as const;

const readJson = <T>(url: URL): T => JSON.parse(readFileSync(url, 'utf8')) as T;
const catalog = readJson<CatalogData>(new URL('../../src/stripe/catalog.json', import.meta.url));
const fields = readJson<FieldsData>(new URL('./stripe-fields.json', import.meta.url));
if (catalog.apiVersion !== fields.apiVersion) {
  throw new Error(`stripe-fields.json is for Stripe ${fields.apiVersion}, the catalog for ${catalog.apiVersion}: run scripts/stripe-fields.ts`);
}

/** docs/stripe.md "Column types": the Stripe field's kind → the column type. */
const TYPE_OF_KIND: Record<string, string> = {
  integer: 'bigint',
  'unix-time': 'timestamptz',
  boolean: 'boolean',
  decimal: 'numeric',
  number: 'double precision',
  string: 'text',
  'string[]': 'text[]',
  reference: 'text',
  array: 'jsonb',
  object: 'jsonb',
  polymorphic: 'jsonb',
};

/** `checkout.session` → `checkout_session`. */
export const tableNameOf = (object: string) => object.replace(/\./g, '_');

/**
 * Whether an object listed under a parent names that parent: by a field called after the
 * parent's table (`invoice`, `customer`) or after the list's parameter (`subscription`), but
 * not a bare `id` parameter (/v1/application_fees/{id}/refunds).
 */
function namesParent(objectFields: Record<string, string>, list: ListData): boolean {
  const parent = list.parent!;
  const param = parent.pathParam ?? parent.queryParam;
  return parent.table in objectFields || (param !== undefined && param !== 'id' && param in objectFields);
}

function columnsOf(object: string): ExpectedColumn[] {
  const kinds = fields.objects[object];
  if (!kinds) throw new Error(`stripe-fields.json has no ${object}`);
  return Object.entries(kinds).map(([name, kind]) => {
    const type = TYPE_OF_KIND[kind];
    if (!type) throw new Error(`stripe-fields.json: ${object}.${name} is of an unknown kind ${kind}`);
    return { name, kind, type };
  });
}

let tables: Map<string, ExpectedTable> | undefined;

/** Every table a Stripe sync's database should have, by name. */
export function expectedTables(): Map<string, ExpectedTable> {
  if (tables) return tables;
  tables = new Map();
  for (const t of catalog.tables) {
    const columns = columnsOf(t.object);
    const kinds = fields.objects[t.object]!;
    if (t.lists.some((l) => l.parent && !namesParent(kinds, l))) columns.push({ name: PARENT_ID, type: 'text' });
    columns.push({ name: STRIPE_ACCOUNT, type: 'text' });
    const name = tableNameOf(t.object);
    const scope = SCOPED[name];
    if (scope) columns.push({ name: SCOPED_KEY, type: 'text' });
    tables.set(name, { name, object: t.object, key: scope ? SCOPED_KEY : 'id', columns, ...(scope ? { scope } : {}) });
  }
  for (const { table, key } of Object.values(UPCOMING_TABLES)) {
    const columns = [{ name: key, type: 'text' }, ...columnsOf('invoice').filter((c) => c.name !== 'id'), { name: STRIPE_ACCOUNT, type: 'text' }];
    tables.set(table, { name: table, object: 'invoice', key, columns });
  }
  return tables;
}

/** The list endpoints of an object type (catalog data), top-level first. */
export function listsOf(object: string): ListData[] {
  return catalog.tables.find((t) => t.object === object)?.lists ?? [];
}

/**
 * One field's value as its column holds it. Values are the API's own (amounts stay integers
 * in minor units, currencies stay as Stripe spells them: lowercase); only the representation
 * changes: Unix seconds become a time, an expanded reference becomes its id.
 */
export function cellOf(column: ExpectedColumn, value: Json): Json {
  if (value === undefined || value === null) return null;
  if (column.kind === 'reference' && typeof value === 'object' && !Array.isArray(value)) return (value as { id?: unknown }).id ?? null;
  if (column.kind === 'unix-time' && typeof value === 'number') return new Date(value * 1000).toISOString();
  return value;
}

/**
 * An upstream object as its row, of `account` (a connected account, or null for the
 * platform's own); `extra` holds what the object does not carry (keys, parent links).
 */
export function expectedRow(table: ExpectedTable, object: UpstreamObject, extra: Row = {}, account: string | null = null): Row {
  const row: Row = {};
  for (const column of table.columns) row[column.name] = cellOf(column, object[column.name]);
  row[STRIPE_ACCOUNT] = account;
  if (table.scope) {
    const owner = table.scope === STRIPE_ACCOUNT ? account : object[table.scope];
    row[SCOPED_KEY] = typeof owner === 'string' && owner !== '' ? `${owner}/${object.id}` : object.id;
  }
  return Object.assign(row, extra);
}
