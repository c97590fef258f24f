import type pg from 'pg';
import { ident, inTransaction } from '../db/sql.ts';
import type { Logger } from '../log.ts';
import { commentStatements, createTableStatements, qualified, type TableShape } from '../writer/shape.ts';
import type { Row } from '../writer/upsert.ts';
import { type CatalogColumn, type CatalogList, type CatalogTable, loadCatalog, STRIPE_API_VERSION } from './catalog.ts';
import type { StripeObject } from './client.ts';

/** Upcoming invoices have no id; the database keys them by customer or subscription. */
export const UPCOMING = {
  customer: { table: 'upcoming_customer_invoice', key: 'customer_id' },
  subscription: { table: 'upcoming_subscription_invoice', key: 'subscription_id' },
} as const;

export interface StripeTable {
  /** Stripe's `object` (invoice for the upcoming tables). */
  object: string;
  shape: TableShape;
  columns: CatalogColumn[];
  /** Set where ids are unique only within an account: the field that names it (see KEY_SCOPES). */
  scope?: KeyScope;
}

/** The column holding the connected account a row belongs to: NULL for the platform's own objects. */
export const ACCOUNT_COLUMN = 'stripe_account';
/** The key of tables whose ids repeat across accounts: `<account>/<id>`, or the bare id for the platform's own. */
export const SCOPED_KEY_COLUMN = '_key';

/**
 * Stripe ids are unique across accounts, except where the caller chooses them (coupons,
 * plans and products take an `id` on create) and for capabilities, named by what they allow
 * (`card_payments`) within the account they belong to. Those tables are keyed by account and
 * id together. The reference lists (tax codes, country specs…) are the same for every account
 * and are read once, on the platform, so they need no scope.
 */
type KeyScope = typeof ACCOUNT_COLUMN | 'account';
const KEY_SCOPES: Record<string, KeyScope> = { coupon: ACCOUNT_COLUMN, plan: ACCOUNT_COLUMN, product: ACCOUNT_COLUMN, capability: 'account' };

let tables: Map<string, StripeTable> | undefined;

/** Added to child tables whose objects do not name the object they were listed under. */
export const PARENT_COLUMN = '_parent_id';

/**
 * The column that ties a child row to its parent: the parent's own name (`customer`,
 * `invoice`), else the list's parameter, else PARENT_COLUMN, which the sync fills.
 */
export function linkColumn(table: Pick<CatalogTable, 'columns'>, list: CatalogList): string | undefined {
  if (!list.parent) return undefined;
  const names = new Set(table.columns.map((c) => c.name));
  const param = list.parent.pathParam ?? list.parent.queryParam;
  if (names.has(list.parent.table)) return list.parent.table;
  if (param && param !== 'id' && names.has(param)) return param;
  return PARENT_COLUMN;
}

function shapeOf(name: string, key: string, columns: CatalogColumn[], comment: string): TableShape {
  return {
    schema: 'public',
    name,
    key,
    columns: columns.map((c) => ({ name: c.name, type: c.type, comment: c.description ? `Stripe ${c.name}: ${c.description}` : `Stripe ${c.name}` })),
    comment,
  };
}

const parentColumn: CatalogColumn = { name: PARENT_COLUMN, type: 'text', description: 'the id of the object this was listed under (added by Tributary)' };
const accountColumn: CatalogColumn = {
  name: ACCOUNT_COLUMN,
  type: 'text',
  description: "the connected account this object belongs to, NULL for the platform's own (added by Tributary)",
};
const scopedKeyColumn: CatalogColumn = {
  name: SCOPED_KEY_COLUMN,
  type: 'text',
  description: "the row's key: the id, prefixed with the account it belongs to and a slash for a connected account's (added by Tributary)",
};

/** Every Stripe table by name: the catalog's, plus the two upcoming-invoice tables. */
export function stripeTables(): Map<string, StripeTable> {
  if (tables) return tables;
  tables = new Map();
  for (const t of loadCatalog().tables) {
    const needsParent = t.lists.some((l) => linkColumn(t, l) === PARENT_COLUMN);
    const scope = KEY_SCOPES[t.table];
    const columns: CatalogColumn[] = [...(scope ? [scopedKeyColumn] : []), ...t.columns, ...(needsParent ? [parentColumn] : []), accountColumn];
    const comment = `Stripe ${t.object} objects (API ${STRIPE_API_VERSION})${t.description ? `: ${t.description}` : ''}`;
    const shape = shapeOf(t.table, scope ? SCOPED_KEY_COLUMN : 'id', columns, comment);
    tables.set(t.table, { object: t.object, columns, shape, ...(scope ? { scope } : {}) });
  }
  const invoice = loadCatalog().tables.find((t) => t.table === 'invoice') as CatalogTable;
  for (const [parent, u] of Object.entries(UPCOMING)) {
    const columns: CatalogColumn[] = [
      { name: u.key, type: 'text', description: `the ${parent} this upcoming invoice previews` },
      ...invoice.columns.filter((c) => c.name !== 'id'),
      accountColumn,
    ];
    const comment = `Stripe upcoming invoice of each ${parent} (invoices/create_preview), refetched when events touch it`;
    tables.set(u.table, { object: 'invoice', columns, shape: shapeOf(u.table, u.key, columns, comment) });
  }
  return tables;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One API value as its column's type; a value of an unexpected shape becomes NULL rather than failing the batch. */
function cell(column: CatalogColumn, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  switch (column.type) {
    case 'text':
      if (typeof value === 'string') return value;
      // An expanded reference: keep its id, as an unexpanded one would be.
      if (isObject(value)) return typeof value.id === 'string' ? value.id : JSON.stringify(value);
      return String(value);
    case 'bigint':
      return typeof value === 'number' && Number.isInteger(value) ? value : null;
    case 'double precision':
      return typeof value === 'number' ? value : null;
    case 'numeric':
      return typeof value === 'number' || (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value)) ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'timestamptz':
      return typeof value === 'number' ? new Date(value * 1000).toISOString() : null;
    case 'text[]':
      return Array.isArray(value) ? value.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))) : null;
    case 'jsonb':
      return value;
  }
}

/**
 * The key of an object's row: its id, but in a scoped table prefixed by the account it
 * belongs to (`acct_…/gold`), so two accounts' products `gold` are two rows.
 */
export function rowKey(table: StripeTable, object: StripeObject, account: string | null): string {
  const id = String(object.id);
  const owner = table.scope === 'account' ? object.account : table.scope ? account : null;
  return typeof owner === 'string' && owner !== '' ? `${owner}/${id}` : id;
}

/**
 * A Stripe object as a row of its table, of `account` (a connected account's id, or null for
 * the platform's own); `extra` fills what the object does not carry (upcoming keys, parent links).
 */
export function rowOf(table: StripeTable, object: StripeObject, extra?: Row, account: string | null = null): Row {
  const row: Row = {};
  for (const column of table.columns) row[column.name] = cell(column, object[column.name]);
  row[ACCOUNT_COLUMN] = account;
  if (table.scope) row[SCOPED_KEY_COLUMN] = rowKey(table, object, account);
  return extra ? Object.assign(row, extra) : row;
}

/**
 * Moves the primary key of a table built before it was scoped by account from `id` to the
 * scoped key, filled from the rows (the platform's keep their id as key). Each row's update
 * is an event whose only changed column is the key: a one-off, on the few rows of these tables.
 */
async function rekey(client: pg.ClientBase, table: StripeTable): Promise<void> {
  const name = qualified(table.shape);
  const owner = ident(table.scope === 'account' ? 'account' : ACCOUNT_COLUMN);
  await client.query(`UPDATE ${name} SET ${ident(SCOPED_KEY_COLUMN)} = CASE WHEN coalesce(${owner}, '') = '' THEN id ELSE ${owner} || '/' || id END`);
  const { rows } = await client.query<{ conname: string }>("SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'", [name]);
  for (const { conname } of rows) await client.query(`ALTER TABLE ${name} DROP CONSTRAINT ${ident(conname)}`);
  await client.query(`ALTER TABLE ${name} ADD PRIMARY KEY (${ident(SCOPED_KEY_COLUMN)})`);
}

/**
 * Creates the tables that are missing and adds the columns a newer catalog brings, in one
 * transaction; what was built is kept in `public_swap._tables` under `stripe:<table>`. The
 * bookkeeping it relies on is the sync database's steps (migrations.ts), applied before it
 * is called: at provisioning, and by the runner factory before a runner starts.
 */
export async function ensureTables(pool: pg.Pool, logger: Logger): Promise<void> {
  const created = await inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ db_name: string; mapping: { columns: string[] } }>(
      "SELECT db_name, mapping FROM public_swap._tables WHERE upstream_id LIKE 'stripe:%'",
    );
    const built = new Map(rows.map((r) => [r.db_name, new Set(r.mapping.columns)]));
    let created = 0;
    for (const [name, table] of stripeTables()) {
      const have = built.get(name);
      if (!have) {
        for (const statement of createTableStatements(table.shape)) await client.query(statement);
        created++;
      } else {
        const added = table.shape.columns.filter((c) => !have.has(c.name));
        for (const c of added) await client.query(`ALTER TABLE ${qualified(table.shape)} ADD COLUMN ${ident(c.name)} ${c.type}`);
        if (added.length === 0) continue;
        if (added.some((c) => c.name === table.shape.key)) await rekey(client, table);
        for (const statement of commentStatements(table.shape)) await client.query(statement);
        logger.info({ table: name, columns: added.map((c) => c.name) }, 'stripe table gained columns');
      }
      await client.query(
        `INSERT INTO public_swap._tables (upstream_id, db_name, mapping) VALUES ($1, $2, $3)
         ON CONFLICT (upstream_id) DO UPDATE SET mapping = excluded.mapping, built_at = now()`,
        [`stripe:${name}`, name, JSON.stringify({ columns: table.shape.columns.map((c) => c.name) })],
      );
    }
    return created;
  });
  if (created > 0) logger.info({ tables: created }, 'stripe tables created');
}
