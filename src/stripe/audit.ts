/**
 * The continuous audit (docs/stripe.md#the-audit): the sync's tables compared with Stripe
 * again and again, one table at a time, by the product's own rules, within a small share of
 * the account's limit. Some changes come with no event (a balance transaction that matures, a
 * payment method a payment used unattached, an edit Stripe never announced), and a row can be
 * lost or left behind by hand; the feed alone would never see those.
 *
 * Each page of a table's top-level lists is tried against the database in a transaction that
 * is rolled back: the same write path the feed and the backfill take, so what it would write
 * is exactly a difference. A page with a difference is written for real only `settleMs` after
 * it was read, with the read's time as its version: by then the feed has applied what it was
 * about to (the version guard keeps anything newer), so only what the feed missed is written,
 * and counted. A table whose every list was read also loses the rows the lists did not show
 * and nothing wrote since the table's read began (extra rows). Each fix is an ordinary write,
 * so the stream carries it as an ordinary event.
 */
import type pg from 'pg';
import { type DriftCounts, DriftLog, NO_DRIFT } from '../control/drift.ts';
import { inTransaction } from '../db/sql.ts';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { pause } from '../time.ts';
import { backfillLists, EXPAND, PARENT_FILTER } from './backfill-plan.ts';
import { type CatalogList, loadCatalog } from './catalog.ts';
import type { StripeClient } from './client.ts';
import { parentGone, unreadable } from './incomplete.ts';
import { type ApplyResult, applyChanges, type Change, tableOfList } from './store.ts';
import { markUpcomingFor } from './upcoming.ts';
import { deleteUnversionedSince } from '../writer/delete.ts';
import { qualified } from '../writer/shape.ts';
import { ACCOUNT_COLUMN, rowKey, stripeTables } from './tables.ts';

/** The audit's share of the account's Stripe limit: 2 requests a second in test mode, 10 live. */
export const AUDIT_SHARE = 0.1;
/** A page with a difference waits this long before it is written: the feed's lag, many times over. */
export const AUDIT_SETTLE_MS = 10_000;
/** A round starts at most this often (a small account's round is over in a minute). */
export const AUDIT_EVERY_MS = 10 * 60_000;
/** After a failure (Stripe or the database away), the table is tried again this much later. */
const RETRY_MS = 30_000;

export interface AuditOptions {
  /** A client drawing on the audit's share (runner.ts); asked afresh for each table. */
  client: () => Promise<StripeClient>;
  db: pg.Pool;
  /** The control database, where the drift found is recorded (DriftLog). */
  control: pg.Pool;
  syncId: string;
  logger: Logger;
  sharePerSecond: number;
  settleMs?: number;
  /** How often a round starts (default AUDIT_EVERY_MS); 0: never. */
  everyMs?: number;
  /** Told when upcoming invoices were marked for a refresh (the runner's loop then wakes). */
  marked?: () => void;
}

/**
 * A table the audit compares: its top-level lists (with those split by a query parameter, the
 * customers of each test clock, which the plain list leaves out), and whether they are all of
 * its lists (then rows no list showed are extra).
 */
export interface AuditedTable {
  table: string;
  lists: CatalogList[];
  whole: boolean;
}

/**
 * The lists by a query parameter that give what the plain list leaves out, the objects of test
 * clocks, and which of their parents to read them for (a condition over the parent `p`): the
 * customers, subscriptions and quotes of each clock, the schedules of each clock's customers.
 * Their parents are few. Every other list read once per parent costs a request per customer,
 * subscription or account (a round of them would take minutes): not compared.
 */
function clockParents(list: CatalogList): string | undefined {
  if (!list.parent?.queryParam) return undefined;
  if (list.parent.table === 'test_helpers_test_clock') return 'true';
  const filter = PARENT_FILTER[list.path]?.where;
  return filter === 'p.test_clock IS NOT NULL' ? filter : undefined;
}

/**
 * The platform account's tables with a top-level list, in catalog order (retained ones keep
 * what Stripe forgot: not compared), with their test-clock lists (clockParents).
 */
export function auditedTables(): AuditedTable[] {
  const retained = new Set(
    loadCatalog()
      .tables.filter((t) => t.retained)
      .map((t) => t.table),
  );
  const byTable = new Map<string, CatalogList[]>();
  for (const list of backfillLists(null)) {
    const table = tableOfList(list)!;
    if (retained.has(table)) continue;
    byTable.set(table, [...(byTable.get(table) ?? []), list]);
  }
  return [...byTable]
    .filter(([, lists]) => lists.some((l) => !l.parent))
    .map(([table, lists]) => ({ table, lists: lists.filter((l) => !l.parent || clockParents(l)), whole: lists.every((l) => !l.parent) }));
}

export class StripeAudit {
  private readonly drift: DriftLog;
  private readonly logger: Logger;

  constructor(private readonly options: AuditOptions) {
    this.drift = new DriftLog(options.control, options.syncId, 'audit');
    this.logger = options.logger.child({ part: 'audit' });
  }

  /** Rounds until the signal ends; a failure is logged and the table tried again, never holding up the feed. */
  async run(signal: AbortSignal): Promise<void> {
    const every = this.options.everyMs ?? AUDIT_EVERY_MS;
    // Turned off by the operator (TRIBUTARY_STRIPE_AUDIT_EVERY_S=0).
    if (every === 0) return;
    let last: Awaited<ReturnType<DriftLog['lastRound']>>;
    await this.retrying(signal, async () => {
      last = await this.drift.lastRound();
    });
    // A round cut short (a restart) starts again at once; else a round after the last one's start.
    const cutShort = last && !last.completed;
    let due = cutShort ? Date.now() : (last?.startedAt.getTime() ?? Date.now()) + every;
    while (!signal.aborted) {
      await pause(Math.max(0, due - Date.now()), signal);
      if (signal.aborted) return;
      const started = new Date();
      await this.retrying(signal, () => this.drift.roundStarted(started, this.options.sharePerSecond));
      // A table's differences settle while the next table is read.
      const settling: Promise<void>[] = [];
      for (const table of auditedTables()) {
        await this.retrying(signal, async () => {
          const settle = await this.read(table, signal);
          settling.push(this.retrying(signal, settle));
        });
      }
      await Promise.all(settling);
      if (signal.aborted) return;
      await this.retrying(signal, () => this.drift.roundCompleted(started, new Date()));
      due = started.getTime() + every;
    }
  }

  private async retrying(signal: AbortSignal, work: () => Promise<void>): Promise<void> {
    while (!signal.aborted) {
      try {
        return await work();
      } catch (error) {
        if (signal.aborted) return;
        this.logger.warn({ err: toError(error) }, 'the audit failed (Stripe or a database away); trying again in 30 s');
        await pause(RETRY_MS, signal);
      }
    }
  }

  /**
   * Reads one table's lists, trying each page; returns what finishes its comparison once
   * settled: the pages with a difference written, its extra rows removed, the drift recorded.
   * (Done again after a failure: a page written twice writes nothing the second time.)
   */
  async read(audited: AuditedTable, signal: AbortSignal): Promise<() => Promise<void>> {
    const { db } = this.options;
    const settleMs = this.options.settleMs ?? AUDIT_SETTLE_MS;
    const table = stripeTables().get(audited.table)!;
    const client = await this.options.client();
    const started = Date.now();
    const seen: string[] = [];
    const held: Array<{ changes: Change[]; readAt: number }> = [];
    let lastRead = started;
    let readable = true;
    for (const list of audited.lists) {
      // A list by a query parameter, once for each parent the database has (test clocks: a few).
      const parents = list.parent ? await parentIds(db, list.parent.table, clockParents(list)!) : [undefined];
      for (const parentId of parents) {
        try {
          for (let after: string | undefined; ; ) {
            signal.throwIfAborted();
            const readAt = Date.now();
            const query = { ...list.query, ...(parentId ? { [list.parent!.queryParam!]: parentId } : {}), ...(after ? { starting_after: after } : {}) };
            const page = await client.listPage(list.path, query, list.paged !== false);
            lastRead = readAt;
            const strip = EXPAND[list.path];
            const changes: Change[] = page.data.map((object) => ({
              object,
              version: readAt,
              list,
              ...(parentId ? { parentId } : {}),
              ...(strip ? { strip } : {}),
            }));
            if (audited.whole) for (const change of changes) seen.push(rowKey(table, change.object, null));
            if (changes.length > 0 && (await this.differs(changes))) held.push({ changes, readAt });
            after = page.data.at(-1)?.id;
            if (!page.has_more || !after || list.paged === false) break;
          }
        } catch (error) {
          // A parent gone since (its event follows); a list the key cannot read (a restricted key, a
          // product not enabled): the table is compared as far as it can be.
          if (parentId && parentGone(error)) continue;
          if (!unreadable(error)) throw error;
          readable = false;
        }
      }
    }
    this.logger.debug({ table: audited.table, rows: seen.length, held: held.length, ms: Date.now() - started }, 'the audit read a table');
    return async () => {
      const found = new Map<string, DriftCounts>();
      for (const { changes, readAt } of held) {
        await pause(Math.max(0, readAt + settleMs - Date.now()), signal);
        signal.throwIfAborted();
        count(
          found,
          await inTransaction(db, async (tx) => {
            const result = await applyChanges(tx, changes, [], null);
            // A customer, subscription or invoice put right changes its upcoming invoice too, as its event would have.
            if (result.written + result.deleted > 0)
              await markUpcomingFor(
                tx,
                changes.map((c) => c.object),
              );
            return result;
          }),
        );
        this.options.marked?.();
      }
      if (audited.whole && readable) {
        await pause(Math.max(0, lastRead + settleMs - Date.now()), signal);
        signal.throwIfAborted();
        const extra = await removeUnseen(db, audited.table, seen, started);
        if (extra > 0) add(found, audited.table, { missing: 0, differing: 0, extra });
      }
      await this.drift.compared([{ table: audited.table, at: new Date(started) }], found);
      for (const [name, d] of found) this.logger.info({ table: name, ...d }, 'the audit found rows unlike Stripe and fixed them');
    };
  }

  /** Whether writing the changes would change anything: tried, then rolled back. */
  private async differs(changes: Change[]): Promise<boolean> {
    const client = await this.options.db.connect();
    try {
      await client.query('BEGIN');
      const result = await applyChanges(client, changes, [], null);
      return result.written + result.deleted > 0;
    } finally {
      await client.query('ROLLBACK').then(
        () => client.release(),
        (error: unknown) => client.release(toError(error)),
      );
    }
  }
}

/** The platform's rows of a parent table that `where` (clockParents) picks: the ids its children's lists are read by. */
async function parentIds(db: pg.Pool, parentTable: string, where: string): Promise<string[]> {
  const shape = stripeTables().get(parentTable)!.shape;
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM ${qualified(shape)} p WHERE p.${ACCOUNT_COLUMN} IS NULL AND (${where}) ORDER BY id`);
  return rows.map((r) => r.id);
}

function count(found: Map<string, DriftCounts>, result: ApplyResult): void {
  for (const [table, w] of result.byTable ?? []) add(found, table, { missing: w.inserted, differing: w.updated, extra: w.deleted });
}

function add(found: Map<string, DriftCounts>, table: string, d: DriftCounts): void {
  const now = found.get(table) ?? NO_DRIFT;
  found.set(table, { missing: now.missing + d.missing, differing: now.differing + d.differing, extra: now.extra + d.extra });
}

/**
 * The platform's rows of the table that the lists did not show and that nothing wrote since
 * `since` (the feed's and the proxy's writes leave a newer version): gone from Stripe.
 */
function removeUnseen(db: pg.Pool, tableName: string, seen: string[], since: number): Promise<number> {
  return deleteUnversionedSince(db, stripeTables().get(tableName)!.shape, {
    versions: 'public_swap._stripe_versions',
    tableName,
    since,
    within: { column: ACCOUNT_COLUMN, value: null },
    seen,
  });
}
