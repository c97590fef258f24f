import type pg from 'pg';
import { semaphore } from '../semaphore.ts';
import { readParentsInOrder } from './parents.ts';
import { STRIPE_SCHEMAS } from './migrations.ts';
import { ident, inTransaction } from '../db/sql.ts';
import type { Logger } from '../log.ts';
import { deleteUnversionedSince } from '../writer/delete.ts';
import { type CatalogList, loadCatalog } from './catalog.ts';
import { type RequestNotes, type StripeClient, StripeError, type StripeList, type StripeObject } from './client.ts';
import { failureReason, type IncompleteLists, parentGone, retryReason, unreadable } from './incomplete.ts';
import { clearStates, loadState, loadStates, saveState } from '../sync/state.ts';
import { applyChanges, type Change, listKey, tableOfList } from './store.ts';
import { stateKeys } from './scope.ts';
import { backfillLists, EMPTY_WHEN_NULL, EXPAND, PARENT_FILTER, PARENTS_AT_ONCE, PLACE_SAVED_EVERY_MS, priorities } from './backfill-plan.ts';
import { ACCOUNT_COLUMN, stripeTables } from './tables.ts';

export interface BackfillState {
  /** When this backfill began (ms); rows it did not touch are gone upstream, once it completes. */
  startedAt: number;
  /** The newest event when it began: the events feed resumes from here, so nothing is missed. */
  eventsCursor: { id: string | null; created: number };
  completedAt?: number;
  /** A backfill after the events cursor expired: it also removes what it did not see. */
  again?: boolean;
}

/** Per list: where it stopped. Saved in the transaction that wrote the page. */
interface ListState {
  after?: string;
  parentAfter?: string;
  done?: boolean;
  /** Why the list was not read (a restricted key without its permission, a product not enabled). */
  skipped?: string;
}

export const BACKFILL_KEY = stateKeys(null).backfill;

export interface BackfillOptions {
  /** Acting on the account this backfill reads (`client.account`: a connected one, or null). */
  client: StripeClient;
  db: pg.Pool;
  logger: Logger;
  signal: AbortSignal;
  /** Requests in flight at once (default: by the client's share); the quota decides the rate, this only keeps it fed. */
  concurrency?: number;
  /** `force`: write it now (a table became ready), not only at the next second's write. */
  progress(progress: Record<string, unknown>, force?: boolean): Promise<void>;
  /** Told which lists are held up or cannot be read, and why, and when a read of one succeeds. */
  incomplete?: IncompleteLists;
  /** Only the lists of the core tables, leaving the backfill to be completed by a later run. */
  firstOnly?: boolean;
}

export interface BackfillResult {
  objects: number;
  skipped: Array<{ list: string; table: string; reason: string }>;
}

/**
 * Takes the events cursor and records the start, unless a backfill was begun already (and
 * `again` is off), for the account the client acts on.
 */
export async function beginBackfill(client: StripeClient, db: pg.Pool, again: boolean): Promise<BackfillState> {
  const keys = stateKeys(client.account);
  const current = await loadState<BackfillState>(db, STRIPE_SCHEMAS, keys.backfill);
  if (current && !again) return current;
  const newest = await client.listPage('/v1/events', { limit: 1 });
  const event = newest.data[0];
  const state: BackfillState = {
    startedAt: Date.now(),
    eventsCursor: { id: event?.id ?? null, created: typeof event?.created === 'number' ? event.created : Math.floor(Date.now() / 1000) - 5 },
    ...(again ? { again: true } : {}),
  };
  await inTransaction(db, async (tx) => {
    await clearStates(tx, STRIPE_SCHEMAS, keys.lists);
    await saveState(tx, STRIPE_SCHEMAS, keys.backfill, state);
  });
  return state;
}

/**
 * Reads every list of the catalog into the database. Top-level lists run concurrently;
 * a list under a parent (a customer's tax ids) runs once the parent's table is complete,
 * for each parent whose inline copy of that list was not already complete. Each page is
 * written with its list's cursor in one transaction, so a crash resumes at the next page.
 */
export async function runBackfill(options: BackfillOptions, state: BackfillState): Promise<BackfillResult> {
  const { db, logger } = options;
  const account = options.client.account;
  const keys = stateKeys(account);
  const all = backfillLists(account);
  const priority = priorities(all);
  const lists = options.firstOnly ? all.filter((l) => priority.get(l) === 0) : all;
  const saved = await loadStates<ListState>(db, STRIPE_SCHEMAS, keys.lists);
  // Enough requests in flight to fill the share at a quarter second each, Stripe's usual latency.
  const slots = options.concurrency ?? Math.max(8, Math.ceil(options.client.requestsPerSecond / 4));
  const request = semaphore(slots);
  const result: BackfillResult = { objects: 0, skipped: [] };
  let done = lists.filter((l) => saved.get(listKey(l))?.done).length;
  // A table is ready to query once every list that fills it is read: the progress names those still loading.
  const pending = new Set(lists.filter((l) => !saved.get(listKey(l))?.done));
  const tables = new Set(lists.map((l) => tableOfList(l)!));
  let shownPending = -1;
  const report = () => {
    const tablesPending = [...new Set([...pending].map((l) => tableOfList(l)!))].sort();
    const readyNow = tablesPending.length !== shownPending;
    shownPending = tablesPending.length;
    return options.progress(
      {
        phase: 'backfill',
        objects: result.objects,
        lists_done: done,
        lists_total: lists.length,
        tables_total: tables.size,
        tables_pending: tablesPending,
      },
      readyNow,
    );
  };

  // A table is complete when every list that fills it is; children wait on their parent's.
  const finished = new Map<CatalogList, Promise<void>>();
  const tableDone = (table: string) => Promise.all(lists.filter((l) => tableOfList(l) === table).map((l) => finished.get(l)));
  const failures: unknown[] = [];
  const run = async (list: CatalogList) => {
    if (list.parent) await tableDone(list.parent.table);
    // A filter over a table still loading would leave out parents it has not seen yet.
    for (const table of PARENT_FILTER[list.path]?.reads ?? []) await tableDone(table);
    const key = listKey(list);
    const listState = saved.get(key) ?? {};
    let skipped = listState.skipped;
    if (!listState.done) {
      const reader = new ListReader(
        options,
        list,
        key,
        listState,
        (work) => request(work, priority.get(list)),
        (n) => {
          result.objects += n;
          void report().catch(() => undefined);
        },
      );
      skipped = await reader.run();
      done++;
      pending.delete(list);
      void report().catch(() => undefined);
    }
    if (skipped) {
      result.skipped.push({ list: key, table: tableOfList(list)!, reason: skipped });
      options.incomplete?.note(key, tableOfList(list)!, skipped);
    }
  };
  for (const list of lists) {
    const p = run(list).catch((error) => {
      failures.push(error);
    });
    finished.set(list, p);
  }
  await Promise.all(finished.values());
  if (failures.length > 0) throw failures[0];
  options.signal.throwIfAborted();
  if (options.firstOnly) return result;

  if (state.again) await removeUnseen(db, state.startedAt, new Set(result.skipped.map((s) => s.table)), account);
  await saveState(db, STRIPE_SCHEMAS, keys.backfill, { ...state, completedAt: Date.now() });
  await report();
  logger.info({ objects: result.objects, skipped: result.skipped.length, ...(account ? { account } : {}) }, 'stripe backfill complete');
  return result;
}

/**
 * After a second backfill: the account's rows it did not see were deleted upstream while the
 * feed was out of reach. Only tables it read in full, and never another account's rows.
 */
async function removeUnseen(db: pg.Pool, since: number, partial: Set<string>, account: string | null): Promise<void> {
  const read = new Set(backfillLists(account).map((l) => tableOfList(l)));
  // Retained tables (events) keep what the upstream has forgotten.
  for (const table of new Set(
    loadCatalog()
      .tables.filter((t) => !t.retained && read.has(t.table))
      .map((t) => t.table),
  )) {
    if (partial.has(table)) continue;
    const shape = stripeTables().get(table)!.shape;
    await deleteUnversionedSince(db, shape, {
      versions: 'public_swap._stripe_versions',
      tableName: table,
      since,
      within: { column: ACCOUNT_COLUMN, value: account },
    });
  }
}

/**
 * Lists skipped because they could not be read (a restricted key without the permission),
 * and the lists under the parents they hold, made due again: the next backfill run reads
 * them, and a read that succeeds ends their warning. Returns how many lists are due, those
 * a run cut short (a stop, a crash) left due included.
 */
export async function reopenSkipped(db: pg.Pool, account: string | null = null): Promise<number> {
  const prefix = stateKeys(account).lists;
  const saved = await loadStates<ListState>(db, STRIPE_SCHEMAS, prefix);
  const lists = backfillLists(account);
  const skipped = lists.filter((l) => saved.get(listKey(l))?.skipped);
  const left = lists.filter((l) => saved.has(listKey(l)) && !saved.get(listKey(l))!.done);
  if (skipped.length === 0) return left.length;
  // Parents the key could not list gave their child lists nothing to read: those are due too.
  const tables = new Set(skipped.map((l) => tableOfList(l)));
  const due = lists.filter((l) => skipped.includes(l) || (l.parent && tables.has(l.parent.table) && saved.get(listKey(l))?.done));
  await inTransaction(db, async (tx) => {
    for (const list of new Set(due)) await saveState(tx, STRIPE_SCHEMAS, prefix + listKey(list), {} satisfies ListState);
  });
  return new Set([...due, ...left]).size;
}

class ListReader {
  private expandRefused = false;

  constructor(
    private readonly options: BackfillOptions,
    private readonly list: CatalogList,
    private readonly key: string,
    private readonly state: ListState,
    private readonly request: <T>(work: () => Promise<T>) => Promise<T>,
    private readonly counted: (n: number) => void,
  ) {}

  private get table(): string {
    return tableOfList(this.list)!;
  }

  private get account(): string | null {
    return this.options.client.account;
  }

  /** This list's key in `_state`. */
  private get stateKey(): string {
    return stateKeys(this.account).lists + this.key;
  }

  /** Per request: a retry (a 429 waited out, a 5xx) says why this list is held up. */
  private readonly notes: RequestNotes = { onRetry: (error) => this.options.incomplete?.note(this.key, this.table, retryReason(error)) };

  /** Reads the list to its end; returns why it could not, if it could not. */
  async run(): Promise<string | undefined> {
    try {
      if (this.list.parent) await this.eachParent();
      else await this.pages(this.list.path, {}, undefined, this.state.after);
    } catch (error) {
      const reason = unreadable(error);
      if (!reason) {
        if (!this.options.signal.aborted) this.options.incomplete?.note(this.key, this.table, failureReason(error));
        throw error;
      }
      // A connected account's refusals are many alike (every account refuses the same lists): one warning gathers them (connect-progress.ts).
      if (this.account) this.options.logger.debug({ list: this.key, reason, account: this.account }, 'stripe list skipped');
      else this.options.logger.warn({ list: this.key, reason }, 'stripe list skipped');
      await saveState(this.options.db, STRIPE_SCHEMAS, this.stateKey, { done: true, skipped: reason });
      return reason;
    }
    if (this.list.parent) await saveState(this.options.db, STRIPE_SCHEMAS, this.stateKey, { done: true });
    // Read to its end (a list with no parents to read under reads nothing, and is complete too).
    this.options.incomplete?.clear(this.key);
    return undefined;
  }

  /** Every parent id of the account, in id order, except those whose inline list was complete. */
  private async eachParent(): Promise<void> {
    const parent = this.list.parent!;
    const parentKey = ident(stripeTables().get(parent.table)!.shape.key);
    const where = PARENT_FILTER[this.list.path]?.where ?? 'true';
    let after = this.state.parentAfter ?? '';
    for (;;) {
      this.options.signal.throwIfAborted();
      const { rows } = await this.options.db.query<{ id: string }>(
        `SELECT p.id FROM public.${ident(parent.table)} p
          WHERE p.id > $1 AND p.stripe_account IS NOT DISTINCT FROM $3 AND ${where}
            AND NOT EXISTS (SELECT 1 FROM public_swap._stripe_covered c WHERE c.list = $2 AND c.parent_id = p.${parentKey})
          ORDER BY p.id LIMIT 200`,
        [after, this.key, this.account, ...(where.includes('$4') ? [stateKeys(this.account).lists] : [])],
      );
      if (rows.length === 0) return;
      // Each parent's list is a request or two: several at once keep the quota fed whatever the latency.
      const ids = rows.map((r) => r.id);
      await readParentsInOrder(ids, {
        read: (id) => this.parentList(parent, id),
        save: (through) => saveState(this.options.db, STRIPE_SCHEMAS, this.stateKey, { parentAfter: through } satisfies ListState),
        atOnce: PARENTS_AT_ONCE,
        window: 2 * PARENTS_AT_ONCE,
        saveEveryMs: PLACE_SAVED_EVERY_MS,
        signal: this.options.signal,
      });
      after = ids.at(-1)!;
    }
  }

  /** One parent's share of the list; none when the parent is gone since it was listed. */
  private async parentList(parent: NonNullable<CatalogList['parent']>, id: string): Promise<void> {
    const path = parent.pathParam ? this.list.path.replace(`{${parent.pathParam}}`, encodeURIComponent(id)) : this.list.path;
    const query = parent.queryParam ? { [parent.queryParam]: id } : {};
    try {
      await this.pages(path, query, id, undefined);
    } catch (error) {
      if (!parentGone(error)) throw error;
      this.options.logger.debug({ list: this.key, parent: id }, 'parent gone since it was listed; its list is skipped');
    }
  }

  /** One list (or one parent's list), page by page, the next page fetched while this one is written. */
  private async pages(path: string, query: Record<string, string>, parentId: string | undefined, startAfter: string | undefined): Promise<void> {
    const { client, db, signal } = this.options;
    const fetch = (after: string | undefined) => {
      const requestedAt = Date.now();
      const params = { ...this.list.query, ...query, ...(after ? { starting_after: after } : {}) };
      const expand = parentId || this.expandRefused ? undefined : EXPAND[path]?.map((f) => `data.${f}`);
      const list = async () => {
        if (!expand) return client.listPage(path, params, this.list.paged !== false, this.notes);
        try {
          return await client.listPage(path, { ...params, expand }, this.list.paged !== false, this.notes);
        } catch (error) {
          // An account (or API) that will not expand: list plainly, the children cost requests.
          if (!(error instanceof StripeError && error.kind === 'invalid' && /expand/i.test(error.message))) throw error;
          this.expandRefused = true;
          return client.listPage(path, params, this.list.paged !== false, this.notes);
        }
      };
      return this.request(list).then((page) => ({ page, requestedAt }));
    };
    let next: Promise<{ page: StripeList<StripeObject>; requestedAt: number }> | undefined = fetch(startAfter);
    // Left behind when a stop aborts the loop below before it awaits: its failure is nobody's.
    next.catch(() => undefined);
    while (next) {
      signal.throwIfAborted();
      const { page, requestedAt }: { page: StripeList<StripeObject>; requestedAt: number } = await next;
      const last = page.data.at(-1)?.id;
      next = page.has_more && last && this.list.paged !== false ? fetch(last) : undefined;
      next?.catch(() => undefined);
      const strip = parentId || this.expandRefused ? undefined : EXPAND[path];
      const changes: Change[] = page.data.map((object) => ({
        object,
        version: requestedAt,
        list: this.list,
        ...(parentId ? { parentId } : {}),
        ...(strip ? { strip } : {}),
      }));
      const finished = !next;
      const proof = strip ? EMPTY_WHEN_NULL[path] : undefined;
      const empty = proof ? page.data.filter((o) => o[proof.field] === null).map((o) => String(o.id)) : [];
      await inTransaction(db, async (tx) => {
        await applyChanges(tx, changes, [], this.account);
        if (empty.length > 0) {
          await tx.query('INSERT INTO public_swap._stripe_covered (list, parent_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING', [
            proof!.list,
            empty,
          ]);
        }
        // A top-level list saves its cursor with each page; a parent's list saves its place once a batch of parents is read.
        if (!parentId) await saveState(tx, STRIPE_SCHEMAS, this.stateKey, { after: last ?? startAfter, done: finished } satisfies ListState);
      });
      this.counted(page.data.length);
      // A page read: what held this list up (a rate limit, an upstream error) is over.
      this.options.incomplete?.clear(this.key);
    }
  }
}
