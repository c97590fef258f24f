/**
 * A platform's connected accounts, with the sync setting `connected_accounts`: each is found
 * by listing `/v1/accounts`, backfilled and then followed through its own events feed (the
 * key acting on it with `Stripe-Account`), into the same tables with its id in
 * `stripe_account`. An account that leaves the list, or that the key may no longer act on,
 * is removed: its rows are deleted (each deletion an event) and its progress forgotten.
 * Turning the setting off removes them all.
 */
import type pg from 'pg';
import { semaphore } from '../semaphore.ts';
import { ident, inTransaction } from '../db/sql.ts';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { backoffDelay, CYCLE_BACKOFF } from '../retry.ts';
import { clearStates, loadState, loadStates } from '../sync/state.ts';
import { bookkeeping } from '../syncdb/schemas.ts';
import { pause } from '../time.ts';
import type { BackfillState } from './backfill.ts';
import { type StripeClient, StripeError, type StripeObject } from './client.ts';
import { CursorExpired, type EventsCursor, pollEvents } from './events.ts';
import { LateEvents, type LateEventsOptions } from './late-events.ts';
import { STRIPE_SCHEMAS } from './migrations.ts';
import { nextPollGap } from './poll-gap.ts';
import { CONNECTED_BACKFILL_PREFIX, stateKeys } from './scope.ts';
import { applyChanges } from './store.ts';
import { ConnectPush, type Pings, PUSHED_POLL_MS } from './push.ts';
import { AccountsProgress } from './connect-progress.ts';
import { AccountBackfills } from './connect-backfill.ts';
import { ACCOUNT_COLUMN, stripeTables } from './tables.ts';
import type { SyncHooks } from '../kinds/kind.ts';

/** How often the list of connected accounts is read again (Stripe sends no event for a new one). */
export const DISCOVER_EVERY_MS = 60_000;
/** How often a change of the setting is noticed between two reads of the list. */
const SETTING_CHECK_MS = 5_000;
/** Backfills of connected accounts at once, and feeds read at once: the quota paces them, these keep them fed. */
const BACKFILLS_AT_ONCE = 2;
const POLLS_AT_ONCE = 4;

export interface ConnectedAccountsOptions {
  /** The key's client, acting on its own account (the settings of the moment). */
  client(): Promise<StripeClient>;
  /** Whether the setting is on now. */
  enabled(): Promise<boolean>;
  db: pg.Pool;
  logger: Logger;
  /** The normal gap between two reads of an account's feed (idle accounts are read less often). */
  pollIntervalMs: number;
  /**
   * Reads of connected accounts' feeds a second, all accounts together (the runner gives half
   * the sync's share): however many accounts are busy, the platform's own feed, backfills and
   * previews keep the rest, and the share is not spent to its last request.
   */
  pollsPerSecond(): Promise<number>;
  discoverEveryMs?: number;
  /** With push trusted, how often each account's feed is still read (default PUSHED_POLL_MS). */
  pushedPollMs?: number;
  /** Told what the status should say about connected accounts (none: an empty list), whenever it changes. */
  onWarnings(warnings: string[]): void;
  /** Told the accounts' backfill progress (accounts_done, accounts_total, accounts_objects; none: {}), whenever it changes. */
  onProgress?(fields: Record<string, unknown>): void;
  /** Where Stripe may push connected accounts' events, when the service has a public URL. */
  hooks?: SyncHooks;
  /** The sync's pings, which name the accounts deliveries came for. */
  pings?: Pings;
  /** Each account's feed reads its trailing window again for late events (late-events.ts). */
  lateEvents?: Omit<LateEventsOptions, 'logger'>;
}

/** The key may no longer act on the account: it was deleted, or its platform lost access. */
function accountGone(error: unknown): boolean {
  return error instanceof StripeError && error.kind === 'permission' && error.code === 'account_invalid';
}

interface Worker {
  stop: AbortController;
  done: Promise<void>;
  /** Ends the worker's pause between two reads. */
  wake: () => void;
  /** When its last completed read of the feed began (ms); 0 before the first. */
  polledFrom: number;
  /** Woken since its last read began (a delivery, a wait): that read is no test of push. */
  woken: boolean;
}

export class ConnectedAccounts {
  private readonly workers = new Map<string, Worker>();
  /** Accounts the key may no longer act on, removed by the next round of run(): after any listing in flight. */
  private readonly gone = new Set<string>();
  /** Ends run()'s pause between two rounds. */
  private wakeRun: () => void = () => undefined;
  private readonly polls = semaphore(POLLS_AT_ONCE);
  /** When the next read of any account's feed may start (pollsPerSecond spaces them). */
  private nextPollAt = 0;
  private waiters: Array<() => void> = [];
  private readonly push: ConnectPush;
  /** A delivery named an account not followed yet, or a wait: list the accounts at the next round. */
  private discoverNow = false;
  /** When the last completed listing of the accounts began (ms); while the setting is off, the last check of it. */
  private listedFrom = 0;
  private listWarning: string | undefined;
  private shownWarnings = '';
  private readonly progress: AccountsProgress;
  private readonly accountBackfills: AccountBackfills;

  constructor(private readonly options: ConnectedAccountsOptions) {
    this.progress = new AccountsProgress({ db: options.db, onProgress: (f) => options.onProgress?.(f), onWarning: () => this.showWarnings() });
    this.accountBackfills = new AccountBackfills(semaphore(BACKFILLS_AT_ONCE), this.progress);
    this.push = new ConnectPush({
      db: options.db,
      logger: options.logger,
      ...(options.hooks ? { hooks: options.hooks } : {}),
      ...(options.pings ? { pings: options.pings } : {}),
    });
  }

  /**
   * Until `signal` aborts: the setting is checked, the accounts listed every discoverEveryMs
   * and each followed by a worker of its own. The workers stop with it.
   */
  async run(signal: AbortSignal): Promise<void> {
    let listedAt = 0;
    // Once at the start and after each change of the setting: accounts kept while it was on go.
    let cleared = false;
    const listening = this.push.listen(signal, (account) => this.wake(account));
    try {
      while (!signal.aborted) {
        // Made before the round: a wake during it ends the pause after it.
        const woken = new AbortController();
        this.wakeRun = () => woken.abort();
        for (const id of this.gone) {
          this.gone.delete(id);
          await this.remove(id, 'the key may no longer act on it', true);
        }
        const checkedAt = Date.now();
        if (!(await this.options.enabled())) {
          if (!cleared) {
            await this.removeAll('the setting connected_accounts is off');
            await this.push
              .remove(await this.options.client())
              .catch((error: unknown) => this.options.logger.warn({ err: toError(error) }, 'removing the connect webhook endpoint failed'));
            this.listWarning = undefined;
            this.showWarnings();
          }
          cleared = true;
          listedAt = 0;
          // Off: nothing to list, so a wait need not wait for a listing.
          this.listedFrom = checkedAt;
          this.notify();
        } else if (this.discoverNow || Date.now() - listedAt >= (this.options.discoverEveryMs ?? DISCOVER_EVERY_MS)) {
          cleared = false;
          this.discoverNow = false;
          try {
            const from = Date.now();
            await this.discover(signal);
            this.listedFrom = from;
            this.notify();
            await this.push.ensure(await this.options.client());
            this.showWarnings();
            listedAt = Date.now();
          } catch (error) {
            if (signal.aborted) break;
            // Tried again at the next check; the accounts already followed go on meanwhile.
            this.options.logger.warn({ err: toError(error) }, 'listing the connected accounts failed; trying again');
          }
        }
        await pause(Math.min(SETTING_CHECK_MS, this.options.discoverEveryMs ?? DISCOVER_EVERY_MS), AbortSignal.any([signal, woken.signal]));
      }
    } finally {
      for (const w of this.workers.values()) w.stop.abort();
      await Promise.all([...this.workers.values()].map((w) => w.done));
      this.workers.clear();
      await listening;
    }
  }

  /** A delivery for the account: its feed is read now; an account not followed yet is looked for. */
  private wake(account: string): void {
    const worker = this.workers.get(account);
    if (worker) {
      worker.woken = true;
      worker.wake();
      return;
    }
    this.discoverNow = true;
    this.wakeRun();
  }

  private showWarnings(): void {
    const warnings = [this.listWarning, this.push.warning, this.progress.warning].filter((w): w is string => w !== undefined);
    if (JSON.stringify(warnings) === this.shownWarnings) return;
    this.shownWarnings = JSON.stringify(warnings);
    this.options.onWarnings(warnings);
  }

  /**
   * A wait's pass covers the connected accounts too, new ones included: the accounts are
   * listed and every feed read now. isCaughtUp() says when that is done.
   */
  askCaughtUp(): void {
    this.discoverNow = true;
    this.wakeRun();
    for (const w of this.workers.values()) {
      w.woken = true;
      w.wake();
    }
  }

  /** Whether the accounts were listed, and every account followed read its feed to its end (a new one after its backfill), from `since` (ms) on. */
  isCaughtUp(since: number): boolean {
    const { listedBehindMs, accountsBehind } = this.behind(since);
    return listedBehindMs === 0 && accountsBehind === 0;
  }

  /** What isCaughtUp(since) still waits for (also for the log). */
  behind(since: number): { listedBehindMs: number; accountsBehind: number; accounts: number } {
    const behind = [...this.workers.values()].filter((w) => w.polledFrom < since).length;
    return { listedBehindMs: Math.max(0, since - this.listedFrom), accountsBehind: behind, accounts: this.workers.size };
  }

  /** Resolves at the next listing or read of an account's feed, or after `ms`. */
  async progressed(ms: number, signal: AbortSignal): Promise<void> {
    const next = new AbortController();
    this.waiters.push(() => next.abort());
    await pause(ms, AbortSignal.any([signal, next.signal]));
  }

  /** Lists the platform's connected accounts; starts new ones, removes those gone. */
  private async discover(signal: AbortSignal): Promise<void> {
    const client = await this.options.client();
    let listed: StripeObject[];
    const requestedAt = Date.now();
    try {
      listed = await client.listAll('/v1/accounts');
    } catch (error) {
      if (!(error instanceof StripeError && (error.kind === 'permission' || error.kind === 'invalid'))) throw error;
      this.listWarning = `connected accounts are not synced: the key cannot list them (${error.status}: ${error.message})`;
      return;
    }
    this.listWarning = undefined;
    // The accounts' own rows (the platform's `account` table) as listed now.
    await inTransaction(this.options.db, (tx) =>
      applyChanges(
        tx,
        listed.map((object) => ({ object, version: requestedAt })),
      ),
    );
    const ids = new Set(listed.map((a) => String(a.id)));
    for (const id of await this.kept()) {
      if (!ids.has(id)) await this.remove(id, 'it is no longer among the connected accounts', true);
    }
    for (const id of ids) if (!this.workers.has(id)) this.start(id, signal);
  }

  private start(account: string, signal: AbortSignal): void {
    const stop = new AbortController();
    const worker: Worker = { stop, done: Promise.resolve(), wake: () => undefined, polledFrom: 0, woken: false };
    worker.done = this.follow(account, worker, AbortSignal.any([signal, stop.signal])).catch((error) =>
      this.options.logger.error({ err: toError(error), account }, 'connected account worker failed'),
    );
    this.workers.set(account, worker);
    this.progress.followed(account);
  }

  /** One account: its backfill (again when its feed ran out), then its feed, until stopped or gone. */
  private async follow(account: string, worker: Worker, signal: AbortSignal): Promise<void> {
    const { db, logger } = this.options;
    const keys = stateKeys(account);
    let again = false;
    let failures = 0;
    while (!signal.aborted) {
      try {
        const client = (await this.options.client()).forAccount(account);
        await this.accountBackfills.run({ client, db, logger, signal, again });
        again = false;
        let cursor = (await loadState<EventsCursor>(db, STRIPE_SCHEMAS, keys.events))!;
        let lastEventAt = Date.now();
        let gap = 0;
        // The first read after a backfill finds what happened during it: no test of push either.
        let timed = false;
        const late = new LateEvents({ ...this.options.lateEvents, logger });
        while (!signal.aborted) {
          // Made before the read: a wake during it ends the pause after it.
          const woken = new AbortController();
          worker.wake = () => woken.abort();
          const from = Date.now();
          const onTimer = timed && !worker.woken;
          worker.woken = false;
          const polled = await this.polls(async () => {
            await this.pollTurn(signal);
            // The window on its own schedule: a push wakes this read at every delivery.
            return pollEvents(client, db, cursor, { late: { reader: late, now: false } });
          });
          cursor = polled.cursor;
          failures = 0;
          worker.polledFrom = from;
          this.notify();
          if (polled.events + polled.late > 0) lastEventAt = Date.now();
          // Events found on the timer that no delivery announced (a delivery may lag a few seconds).
          if (onTimer && polled.events > 0 && polled.cursor.created < Date.now() / 1000 - 10) {
            this.push.missed();
            this.showWarnings();
          }
          gap = this.push.trusted
            ? (this.options.pushedPollMs ?? PUSHED_POLL_MS)
            : nextPollGap({ intervalMs: this.options.pollIntervalMs, previousGapMs: gap, sinceEventMs: Date.now() - lastEventAt });
          timed = true;
          await pause(gap, AbortSignal.any([signal, woken.signal]));
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof CursorExpired) {
          again = true;
          continue;
        }
        if (accountGone(error)) {
          // Removed by run(), never while it applies a listing read before: that would bring the row back.
          this.gone.add(account);
          this.wakeRun();
          return;
        }
        failures++;
        logger.warn({ err: toError(error), account }, 'following a connected account failed; trying again');
        await pause(backoffDelay(CYCLE_BACKOFF, failures), signal);
      }
    }
  }

  /** Waits for this read's turn: reads of all accounts together are spaced to pollsPerSecond. */
  private async pollTurn(signal: AbortSignal): Promise<void> {
    // While accounts are backfilled, followed feeds take a quarter of their pace: the backfills the rest.
    const perSecond = (await this.options.pollsPerSecond()) / (this.accountBackfills.running > 0 ? 4 : 1);
    const gap = 1000 / Math.max(1, perSecond);
    const at = Math.max(Date.now(), this.nextPollAt);
    this.nextPollAt = at + gap;
    if (at > Date.now()) await pause(at - Date.now(), signal);
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  /** The accounts followed now or with progress kept (a worker not started again since a restart). */
  private async kept(): Promise<Set<string>> {
    const known = await loadStates<BackfillState>(this.options.db, STRIPE_SCHEMAS, CONNECTED_BACKFILL_PREFIX);
    return new Set([...known.keys(), ...this.workers.keys()]);
  }

  private async removeAll(reason: string): Promise<void> {
    for (const id of await this.kept()) await this.remove(id, reason, false);
  }

  /**
   * Stops the account's worker, deletes its rows table by table (the decoder makes each a
   * deletion event) with their versions, and forgets its progress. `gone`: the account left
   * the platform, so its own row in `account` goes too.
   */
  private async remove(account: string, reason: string, gone: boolean): Promise<void> {
    const worker = this.workers.get(account);
    if (worker) {
      this.workers.delete(account);
      worker.stop.abort();
      await worker.done;
    }
    this.progress.forget(account);
    const { db } = this.options;
    for (const [name, table] of stripeTables()) {
      await inTransaction(db, async (tx) => {
        const { rows } = await tx.query<{ key: string }>(
          `DELETE FROM public.${ident(name)} WHERE ${ident(ACCOUNT_COLUMN)} = $1 RETURNING ${ident(table.shape.key)}::text AS key`,
          [account],
        );
        if (rows.length > 0) {
          await tx.query('DELETE FROM public_swap._stripe_versions WHERE tbl = $1 AND id = ANY($2::text[])', [name, rows.map((r) => r.key)]);
        }
      });
    }
    await inTransaction(db, async (tx) => {
      // No tombstone: were the account listed again, its row would come back with it.
      if (gone) {
        await tx.query('DELETE FROM public.account WHERE id = $1 AND stripe_account IS NULL', [account]);
        await tx.query("DELETE FROM public_swap._stripe_versions WHERE tbl = 'account' AND id = $1", [account]);
      }
      const keys = stateKeys(account);
      await tx.query(`DELETE FROM ${bookkeeping(STRIPE_SCHEMAS, '_state')} WHERE key = ANY($1::text[])`, [[keys.backfill, keys.events]]);
      await clearStates(tx, STRIPE_SCHEMAS, keys.lists);
    });
    this.notify();
    this.options.logger.info({ account, reason }, 'connected account removed from the sync');
  }
}
