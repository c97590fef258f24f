/**
 * How far a platform's connected accounts are, for the sync's status: accounts backfilled of
 * accounts followed, and the objects their backfills wrote. And the lists connected accounts
 * cannot read, in one warning: every account tends to refuse the same lists, and fifty
 * warnings alike would bury the rest.
 */
import type pg from 'pg';
import { loadStates } from '../sync/state.ts';
import { STRIPE_SCHEMAS } from './migrations.ts';
import { stateKeys } from './scope.ts';

/** A change of the objects count alone is shown this often at most; an account added or done at once. */
const OBJECTS_EVERY_MS = 1000;
/** Lists the warning names with their reason; more are only counted. */
const LISTS_NAMED = 10;

export interface AccountsProgressOptions {
  db: pg.Pool;
  /** The progress fields (none: an empty object), whenever they change. */
  onProgress(fields: Record<string, unknown>): void;
  /** `warning` changed. */
  onWarning(): void;
}

interface Followed {
  backfilled: boolean;
  /** Objects its backfills wrote while this process followed it. */
  objects: number;
  /** The running backfill's own count (each run counts from 0). */
  run: number;
  /** Its core tables (customer, product, price, subscription, invoice) are complete. */
  coreReady: boolean;
  /** Lists it cannot read, and why. */
  unreadable: Map<string, string>;
}

export class AccountsProgress {
  private readonly accounts = new Map<string, Followed>();
  private shownAt = 0;
  /** The lists the warning names, each with the first reason given (a reason may name its account). */
  private lists = new Map<string, string>();
  /** What the status should say about unreadable lists, if anything. */
  warning: string | undefined;

  constructor(private readonly options: AccountsProgressOptions) {}

  followed(account: string): void {
    if (this.accounts.has(account)) return;
    this.accounts.set(account, { backfilled: false, objects: 0, run: 0, coreReady: false, unreadable: new Map() });
    this.show(true);
  }

  /** A backfill of the account starts (again, after a failure or once its feed ran out). */
  backfilling(account: string): void {
    const a = this.accounts.get(account);
    if (!a) return;
    const was = a.backfilled;
    Object.assign(a, { backfilled: false, run: 0 });
    if (was) this.show(true);
  }

  /** The running backfill's progress report. */
  landed(account: string, progress: Record<string, unknown>): void {
    const a = this.accounts.get(account);
    if (!a || typeof progress.objects !== 'number') return;
    a.objects += progress.objects - a.run;
    a.run = progress.objects;
    this.show(false);
  }

  /** The account's core tables are complete: its first part of the backfill is done. */
  coreReady(account: string): void {
    const a = this.accounts.get(account);
    if (!a || a.coreReady) return;
    a.coreReady = true;
    a.run = 0;
    this.show(true);
  }

  /** The account's backfill is complete (now or before): its unreadable lists are read from its list states. */
  async backfilled(account: string): Promise<void> {
    const states = await loadStates<{ skipped?: string }>(this.options.db, STRIPE_SCHEMAS, stateKeys(account).lists);
    const a = this.accounts.get(account);
    if (!a) return;
    a.unreadable = new Map([...states].filter(([, s]) => s.skipped).map(([list, s]) => [list, s.skipped!]));
    const was = a.backfilled;
    a.backfilled = true;
    a.coreReady = true;
    if (!was) this.show(true);
    this.review();
  }

  forget(account: string): void {
    if (!this.accounts.delete(account)) return;
    this.show(true);
    this.review();
  }

  private show(now: boolean): void {
    if (!now && Date.now() - this.shownAt < OBJECTS_EVERY_MS) return;
    this.shownAt = Date.now();
    const all = [...this.accounts.values()];
    this.options.onProgress(
      all.length === 0
        ? {}
        : {
            accounts_done: all.filter((a) => a.backfilled).length,
            accounts_core_ready: all.filter((a) => a.coreReady).length,
            accounts_total: all.length,
            accounts_objects: all.reduce((n, a) => n + a.objects, 0),
          },
    );
  }

  /**
   * The warning changes when the set of unreadable lists does (gone at once when none is
   * left), and its counts once every account is backfilled: not at each account's end.
   */
  private review(): void {
    const lists = new Map<string, string>();
    let affected = 0;
    for (const a of this.accounts.values()) {
      if (a.unreadable.size > 0) affected++;
      for (const [list, reason] of a.unreadable) if (!lists.has(list)) lists.set(list, this.lists.get(list) ?? reason);
    }
    const settled = [...this.accounts.values()].every((a) => a.backfilled);
    const same = lists.size === this.lists.size && [...lists.keys()].every((l) => this.lists.has(l));
    if (same && !settled) return;
    this.lists = lists;
    const where = settled ? `in ${affected} of ${this.accounts.size} accounts` : 'in the accounts backfilled so far';
    const next = lists.size === 0 ? undefined : `connected accounts: ${describe(lists)} ${where}`;
    if (next === this.warning) return;
    this.warning = next;
    this.options.onWarning();
  }
}

/** "2 lists cannot be read (/v1/a: 403: …; /v1/b: 404: …)", by list, the first LISTS_NAMED named. */
function describe(lists: Map<string, string>): string {
  const sorted = [...lists].sort(([a], [b]) => a.localeCompare(b));
  const named = sorted.slice(0, LISTS_NAMED).map(([list, reason]) => `${list}: ${reason}`);
  if (sorted.length > LISTS_NAMED) named.push(`${sorted.length - LISTS_NAMED} more`);
  return `${sorted.length} ${sorted.length === 1 ? 'list cannot' : 'lists cannot'} be read (${named.join('; ')})`;
}
