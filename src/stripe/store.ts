import type pg from 'pg';
import { deleteChildrenExcept } from '../writer/delete.ts';
import { deleteRows, type Row, upsertRowsCounted } from '../writer/upsert.ts';
import { type CatalogList, loadCatalog, tableForObject } from './catalog.ts';
import type { StripeObject } from './client.ts';
import { ACCOUNT_COLUMN, linkColumn, PARENT_COLUMN, rowKey, rowOf, stripeTables, type StripeTable } from './tables.ts';

/**
 * One change to apply: an object as of `version` (ms), or its deletion. A backfilled page
 * is as of when it was requested; an event as of the end of the second it was created in.
 */
export interface Change {
  object: StripeObject;
  version: number;
  deleted?: boolean;
  /** Set for objects listed under a parent: the parent's id, for the link column. */
  parentId?: string;
  list?: CatalogList;
  /** Fields asked for inline (expanded lists): read for their children, not kept in the row. */
  strip?: string[];
}

export interface ApplyResult {
  written: number;
  deleted: number;
  stale: number;
  /** Objects of a type no table holds (ignored). */
  unknown: number;
  /** By table, the rows written that were not there, that differed, and that went (the audit counts drift by them). */
  byTable?: Map<string, TableWrites>;
}

export interface TableWrites {
  inserted: number;
  updated: number;
  deleted: number;
}

function writesOf(result: ApplyResult, table: string): TableWrites {
  result.byTable ??= new Map();
  let writes = result.byTable.get(table);
  if (!writes) {
    writes = { inserted: 0, updated: 0, deleted: 0 };
    result.byTable.set(table, writes);
  }
  return writes;
}

/** Child lists by parent table, with how to recognise them in an embedded `{object:'list', url}`. */
export interface ChildList {
  list: CatalogList;
  key: string;
  table: string;
  matches(url: URL, parentId: string): boolean;
}

let children: Map<string, ChildList[]> | undefined;

export const listKey = (list: CatalogList) =>
  list.path + (list.query ? `?${new URLSearchParams(list.query)}` : '') + (list.parent ? `#${list.parent.table}` : '');

function childLists(): Map<string, ChildList[]> {
  if (children) return children;
  children = new Map();
  for (const t of loadCatalog().tables) {
    for (const list of t.lists) {
      if (!list.parent) continue;
      const { pathParam, queryParam } = list.parent;
      const pattern = pathParam ? new RegExp(`^${list.path.replace(`{${pathParam}}`, '([^/]+)')}$`) : undefined;
      const entry: ChildList = {
        list,
        key: listKey(list),
        table: t.table,
        matches: (url, parentId) =>
          pattern ? pattern.exec(url.pathname)?.[1] === parentId : url.pathname === list.path && url.searchParams.get(queryParam!) === parentId,
      };
      const siblings = children.get(list.parent.table) ?? [];
      siblings.push(entry);
      children.set(list.parent.table, siblings);
    }
  }
  return children;
}

export function childListsOf(table: string): ChildList[] {
  return childLists().get(table) ?? [];
}

/** The table an object goes to: by its own `object` (lists can be polymorphic). */
function tableOf(object: StripeObject, fallback?: string): StripeTable | undefined {
  const name = (typeof object.object === 'string' ? tableForObject(object.object)?.table : undefined) ?? fallback;
  return name === undefined ? undefined : stripeTables().get(name);
}

/**
 * Applies changes in order, in the caller's transaction. A change older than what the row
 * already reflects is dropped (an event replayed after a backfill that saw its effect);
 * a deletion leaves a tombstone so a late create cannot bring the row back. Lists embedded
 * in an object (a subscription's items, an invoice's lines) are written as their own rows,
 * and when complete they also say which child rows are gone; so do `lists`, child lists read
 * whole apart from their parent (unevented.ts). Every object is `account`'s: a connected
 * account's id, or null for the platform's own; versions are kept by row key.
 */
export async function applyChanges(client: pg.ClientBase, changes: Change[], lists: ChildListRead[] = [], account: string | null = null): Promise<ApplyResult> {
  const result: ApplyResult = { written: 0, deleted: 0, stale: 0, unknown: 0 };
  const applied = await applyGuarded(client, changes, result, account);
  // Inline lists only from changes that were applied: a stale parent's list is stale too.
  const inline: Inline = { account, changes: [], removals: new Map(), covered: [] };
  for (const { table, change } of applied) if (!change.deleted) embedded(table, change, inline);
  // Lists read whole come after the inline first pages they complete: the same items, newer.
  for (const read of lists) addChildren(inline, read.child, read.parentId, read.items, read.version, true);
  if (inline.changes.length > 0) await applyGuarded(client, inline.changes, result, account);
  for (const { table, link, parents } of inline.removals.values()) {
    const shape = stripeTables().get(table)!.shape;
    // Within the account: a parent's id repeats across accounts where callers choose ids.
    const within = { column: ACCOUNT_COLUMN, value: account };
    const gone = await deleteChildrenExcept(client, shape, { link, parents, within });
    result.deleted += gone;
    if (gone > 0) writesOf(result, table).deleted += gone;
  }
  if (inline.covered.length > 0) {
    await client.query(
      `INSERT INTO public_swap._stripe_covered (list, parent_id)
       SELECT c.list, c.parent_id FROM jsonb_to_recordset($1::jsonb) AS c(list text, parent_id text) ON CONFLICT DO NOTHING`,
      [JSON.stringify(inline.covered.map((c) => ({ list: c.list, parent_id: c.parentId })))],
    );
  }
  return result;
}

/** Writes the changes that are not older than what each row reflects; returns those. */
async function applyGuarded(
  client: pg.ClientBase,
  changes: Change[],
  result: ApplyResult,
  account: string | null,
): Promise<Array<{ table: string; change: Change }>> {
  // By table, the last change per row key: later changes in a batch are newer.
  const byTable = new Map<string, Map<string, Change>>();
  for (const change of changes) {
    const table = tableOf(change.object, change.list && tableOfList(change.list));
    if (!table || typeof change.object.id !== 'string') {
      result.unknown++;
      continue;
    }
    const rows = byTable.get(table.shape.name) ?? new Map<string, Change>();
    rows.set(rowKey(table, change.object, account), change);
    byTable.set(table.shape.name, rows);
  }
  const applied: Array<{ table: string; change: Change }> = [];
  for (const [name, rows] of byTable) {
    const table = stripeTables().get(name)!;
    const current = await client.query<{ id: string; version: string; deleted: boolean }>(
      'SELECT id, version, deleted FROM public_swap._stripe_versions WHERE tbl = $1 AND id = ANY($2::text[])',
      [name, [...rows.keys()]],
    );
    const known = new Map(current.rows.map((r) => [r.id, { version: Number(r.version), deleted: r.deleted }]));
    const upserts: Row[] = [];
    const deletes: string[] = [];
    const versions: Array<{ id: string; version: number; deleted: boolean }> = [];
    for (const [id, fetched] of rows) {
      const seen = known.get(id);
      if (seen && (seen.deleted || seen.version > fetched.version)) {
        result.stale++;
        continue;
      }
      // Stripe answers a deleted customer, product, plan … by id with a stub `deleted: true`:
      // fetched again after its deletion (a refetch of a page's objects), it is that deletion.
      const change = fetched.object.deleted === true ? { ...fetched, deleted: true } : fetched;
      applied.push({ table: name, change });
      versions.push({ id, version: change.version, deleted: change.deleted === true });
      if (change.deleted) deletes.push(id);
      else upserts.push(rowOf(table, stripped(change), parentLink(table, change), account));
    }
    const upserted = await upsertRowsCounted(client, table.shape, upserts);
    const gone = await deleteRows(client, table.shape, deletes);
    result.written += upserted.inserted + upserted.updated;
    result.deleted += gone;
    if (upserted.inserted + upserted.updated + gone > 0) {
      const writes = writesOf(result, name);
      writes.inserted += upserted.inserted;
      writes.updated += upserted.updated;
      writes.deleted += gone;
    }
    if (versions.length === 0) continue;
    await client.query(
      `INSERT INTO public_swap._stripe_versions (tbl, id, version, deleted)
       SELECT $1, v.id, v.version, v.deleted FROM jsonb_to_recordset($2::jsonb) AS v(id text, version bigint, deleted boolean)
       ON CONFLICT (tbl, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted
        WHERE _stripe_versions.version <= excluded.version`,
      [name, JSON.stringify(versions)],
    );
  }
  return applied;
}

const listTables = new Map<CatalogList, string>();

export function tableOfList(list: CatalogList): string | undefined {
  if (listTables.size === 0) for (const t of loadCatalog().tables) for (const l of t.lists) listTables.set(l, t.table);
  return listTables.get(list);
}

/** The object without the fields that were only expanded for their inline lists (`a.b` paths). */
function stripped(change: Change): StripeObject {
  if (!change.strip?.length) return change.object;
  const copy: StripeObject = { ...change.object };
  for (const path of change.strip) {
    const [head, ...rest] = path.split('.');
    if (rest.length === 0) delete copy[head!];
    else if (copy[head!] && typeof copy[head!] === 'object') {
      const inner = { ...(copy[head!] as Record<string, unknown>) };
      delete inner[rest.join('.')];
      copy[head!] = inner;
    }
  }
  return copy;
}

function parentLink(table: StripeTable, change: Change): Row | undefined {
  if (!change.list || change.parentId === undefined) return undefined;
  return linkColumn(table, change.list) === PARENT_COLUMN ? { [PARENT_COLUMN]: change.parentId } : undefined;
}

/** Lists an object carries inline (`{object:'list', url, data, has_more}`) that match one of its child lists. */
interface Inline {
  account: string | null;
  changes: Change[];
  /** By child table and link (one statement each): each parent's kept ids; a parent named twice keeps its later (newer) list. */
  removals: Map<string, { table: string; link: string; parents: Map<string, string[]> }>;
  covered: Array<{ list: string; parentId: string }>;
}

/** A parent's child list as read whole: its items, and the rows of that list not among them are gone. */
export interface ChildListRead {
  child: ChildList;
  parentId: string;
  items: StripeObject[];
  version: number;
}

/** A list an object carries inline that is one of its table's child lists; `complete` when no more follow. */
export interface InlineList {
  child: ChildList;
  items: StripeObject[];
  complete: boolean;
}

export function inlineLists(table: string, object: StripeObject): InlineList[] {
  const lists = childListsOf(table);
  if (lists.length === 0) return [];
  const parentId = object.id as string;
  // Inline lists sit at the top (`items`, `lines`) or one level down (`amount_details.line_items`).
  const values = Object.values(object).flatMap((v) =>
    v && typeof v === 'object' && !Array.isArray(v) && (v as { object?: unknown }).object !== 'list' ? [v, ...Object.values(v)] : [v],
  );
  const out: InlineList[] = [];
  for (const value of values) {
    if (!value || typeof value !== 'object' || (value as { object?: unknown }).object !== 'list') continue;
    const inline = value as { url?: unknown; data?: unknown; has_more?: unknown };
    if (typeof inline.url !== 'string' || !Array.isArray(inline.data)) continue;
    const url = new URL(inline.url, 'https://api.stripe.com');
    const child = lists.find((c) => c.matches(url, parentId));
    if (child) out.push({ child, items: inline.data as StripeObject[], complete: inline.has_more === false });
  }
  return out;
}

function embedded(table: string, change: Change, out: Inline): void {
  for (const list of inlineLists(table, change.object)) addChildren(out, list.child, change.object.id as string, list.items, change.version, list.complete);
}

/** A parent's children as rows; a complete list also marks the parent covered and removes the rows not in it. */
function addChildren(out: Inline, child: ChildList, parentId: string, items: StripeObject[], version: number, complete: boolean): void {
  for (const item of items) out.changes.push({ object: item, version, parentId, list: child.list });
  if (!complete) return;
  // A parent by its row key: a product's id repeats across accounts.
  const parentTable = stripeTables().get(child.list.parent!.table);
  out.covered.push({ list: child.key, parentId: parentTable ? rowKey(parentTable, { id: parentId }, out.account) : parentId });
  const childTable = stripeTables().get(child.table)!;
  const link = linkColumn(childTable, child.list);
  if (!link) return;
  const key = `${child.table} ${link}`;
  const group = out.removals.get(key) ?? out.removals.set(key, { table: child.table, link, parents: new Map() }).get(key)!;
  group.parents.set(
    parentId,
    items.map((i) => rowKey(childTable, i, out.account)),
  );
}
