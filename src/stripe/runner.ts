import { isDiskFull } from '../db/transient.ts';
import type { Liveness } from '../sync/liveness.ts';
import type pg from 'pg';
import { STRIPE_SCHEMAS } from './migrations.ts';
import type { Secret } from '../control/secrets.ts';
import type { StripeSettings } from './settings.ts';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { type PassRequests, type PassStart, untilNextPass } from '../sync/passes.ts';
import { StatusReporter } from '../sync/status-reporter.ts';
import { backoffDelay, CYCLE_BACKOFF, FATAL_PAUSE_MS } from '../retry.ts';
import { pause } from '../time.ts';
import { BACKFILL_KEY, type BackfillResult, type BackfillState, beginBackfill, reopenSkipped, runBackfill } from './backfill.ts';
import { IncompleteLists } from './incomplete.ts';
import { StripeClient, StripeError, stripeQuotaKey } from './client.ts';
import { auditShare, syncShare } from './shares.ts';
import { StripeAudit } from './audit.ts';
import { CursorExpired, EVENTS_KEY, type EventsCursor, pollEvents } from './events.ts';
import { LateEvents, type LateEventsOptions } from './late-events.ts';
import { loadState, saveState } from '../sync/state.ts';
import { ensureTables } from './tables.ts';
import { markAllUpcoming, refreshUpcoming } from './upcoming.ts';
import { nextPollGap } from './poll-gap.ts';
import { ConnectedAccounts } from './connect.ts';
import type { Pings } from './push.ts';
import type { SyncHooks } from '../kinds/kind.ts';

export { IDLE_AFTER_MS, IDLE_POLL_MAX_MS, nextPollGap } from './poll-gap.ts';
export { syncShare } from './shares.ts';

export interface StripeRunnerOptions {
  syncId: string;
  /** Told of every status the runner reports (sync/liveness.ts). */
  liveness?: Liveness;
  /** Stripe's account id when the creation check could read it. */
  accountId: string | null;
  control: pg.Pool;
  target: pg.Pool;
  key: Secret;
  baseUrl: string;
  limiter?: QuotaLimiter;
  loadSettings(): Promise<StripeSettings>;
  logger: Logger;
  /** How often the events feed is read (default: twice a second). */
  pollIntervalMs?: number;
  /** Wait requests for this sync, which start the next read of the feed early (PassSignals). */
  passRequests?: PassRequests;
  /** Told of every 429 Stripe answers the sync. */
  onRateLimited?: (note: string) => void;
  /** How often lists the key could not read are tried again (default RECHECK_SKIPPED_MS). */
  recheckSkippedMs?: number;
  /** How often the platform's connected accounts are listed again (default DISCOVER_EVERY_MS). */
  discoverAccountsMs?: number;
  /** Where Stripe may push connected accounts' events (the service has a public URL). */
  hooks?: SyncHooks;
  /** With push working, how often each connected account's feed is still read (default PUSHED_POLL_MS). */
  pushedPollMs?: number;
  /** Reads of connected accounts' feeds a second, all together (default: half the sync's share). */
  connectPollsPerSecond?: number;
  /** The trailing window read again for events Stripe lists late (defaults in late-events.ts). */
  lateEvents?: Omit<LateEventsOptions, 'logger'>;
  /** The audit's pace (defaults in audit.ts): how long a difference settles, how often a round starts. */
  audit?: { settleMs?: number; everyMs?: number; sharePerSecond?: number };
}

/** Lists skipped as unreadable (a permission the key lacks) are tried again this often: a granted permission ends its warning. */
export const RECHECK_SKIPPED_MS = 10 * 60_000;

/** Without new events, `_sync_meta` still says "up to date as of" this often. */
const META_EVERY_MS = 15_000;
/** A wanted pass waiting this long (and each time as long again) for the connected accounts says so in the debug log. */
const WAIT_NOTE_MS = 5_000;
/** Connected accounts go by settings read this recently. */
const SETTINGS_FRESH_MS = 10_000;
/** Upcoming invoice previews are marked by the feed's reads, which wake their loop; this is its safety net. */
const UPCOMING_IDLE_MS = 30_000;

/**
 * Keeps one Stripe account in step: a backfill of every list (resumable), then the events
 * feed twice a second, and upcoming invoices refetched when events touch them.
 */
export class StripeRunner {
  private readonly abort = new AbortController();
  private readonly status: StatusReporter;
  private running: Promise<void> | undefined;
  /** The feed marked previews since the upcoming loop last looked (it then skips its pause). */
  private upcomingMarked = false;
  /** Ends the upcoming loop's idle pause, while there is one. */
  private endUpcomingPause: (() => void) | undefined;
  /** Lists held up or unreadable, and why: the status shows them until they are read. */
  private readonly incomplete: IncompleteLists;
  /** The platform's connected accounts, when the setting is on. */
  private readonly connected: ConnectedAccounts;
  /** The warnings of the last backfill's skipped lists, and of connected accounts: the status shows both. */
  private warnings: { skipped: string[]; connect: string[] } = { skipped: [], connect: [] };
  private lastSettings: { at: number; value: StripeSettings } | undefined;
  /** The key's own feed's reads of its trailing window. */
  private readonly late: LateEvents;
  private auditor: StripeAudit | undefined;

  constructor(private readonly options: StripeRunnerOptions) {
    this.status = new StatusReporter({
      control: options.control,
      target: options.target,
      schemas: STRIPE_SCHEMAS,
      syncId: options.syncId,
      logger: options.logger,
      liveness: options.liveness,
    });
    this.late = new LateEvents({ ...options.lateEvents, logger: options.logger });
    this.incomplete = new IncompleteLists((lists) => this.status.incomplete(lists), options.logger);
    const requests = options.passRequests;
    const pings: Pings | undefined =
      requests?.pingMark && requests.pingedSince && requests.takePingedParts
        ? {
            mark: () => requests.pingMark!(options.syncId),
            since: (mark, timeoutMs, signal) => requests.pingedSince!(options.syncId, mark, timeoutMs, signal),
            take: () => requests.takePingedParts!(options.syncId),
          }
        : undefined;
    this.connected = new ConnectedAccounts({
      client: async () => this.client(await this.settings(SETTINGS_FRESH_MS)),
      enabled: async () => (await this.settings(SETTINGS_FRESH_MS)).connected_accounts,
      db: options.target,
      logger: options.logger,
      pollIntervalMs: options.pollIntervalMs ?? 500,
      ...(options.lateEvents ? { lateEvents: options.lateEvents } : {}),
      pollsPerSecond: async () =>
        options.connectPollsPerSecond ?? Math.floor(syncShare(options.key.reveal(), (await this.settings(SETTINGS_FRESH_MS)).turbo) / 2),
      ...(options.discoverAccountsMs !== undefined ? { discoverEveryMs: options.discoverAccountsMs } : {}),
      ...(options.pushedPollMs !== undefined ? { pushedPollMs: options.pushedPollMs } : {}),
      onWarnings: (warnings) => {
        this.warnings.connect = warnings;
        void this.showWarnings().catch((err: unknown) => options.logger.warn({ err: toError(err) }, 'could not save the warnings'));
      },
      // Beside the platform's own progress (phase, objects, lists_done, lists_total), and kept between its cycles.
      onProgress: (fields) =>
        void this.status.standingProgress(fields).catch((err: unknown) => options.logger.debug({ err: toError(err) }, 'could not record progress')),
      ...(options.hooks ? { hooks: options.hooks } : {}),
      ...(pings ? { pings } : {}),
    });
  }

  private get auditShare(): number {
    return this.options.audit?.sharePerSecond ?? auditShare(this.options.key.reveal());
  }

  private get audit(): StripeAudit {
    const { control, syncId, target, logger, audit } = this.options;
    const client = async () => this.client(await this.settings(SETTINGS_FRESH_MS), this.abort.signal, true);
    const marked = () => this.wakeUpcoming();
    this.auditor ??= new StripeAudit({ client, control, syncId, db: target, logger, ...audit, sharePerSecond: this.auditShare, marked });
    return this.auditor;
  }

  /** Upcoming invoices were marked: the refresh loop looks again at once. */
  private wakeUpcoming(): void {
    this.upcomingMarked = true;
    this.endUpcomingPause?.();
  }

  start(): void {
    this.running = this.loop();
  }

  /** The settings: read afresh, or as read within `freshMs` (the feed reads them every few seconds anyway). */
  private async settings(freshMs = 0): Promise<StripeSettings> {
    const cached = this.lastSettings;
    if (cached && Date.now() - cached.at <= freshMs) return cached.value;
    const value = await this.options.loadSettings();
    this.lastSettings = { at: Date.now(), value };
    return value;
  }

  async stop(): Promise<void> {
    this.abort.abort(new Error('sync stopped'));
    await this.running;
    await this.incomplete.settled();
  }

  /** `audit`: also within the audit's own share, logged under a quota key of its own. */
  private client(settings: StripeSettings, signal = this.abort.signal, audit = false): StripeClient {
    const key = this.options.key.reveal();
    const quotaKey = stripeQuotaKey(this.options.accountId, key);
    return new StripeClient({
      baseUrl: this.options.baseUrl,
      key: this.options.key,
      limiter: this.options.limiter,
      quotaKey,
      // The rest of the limit is the customer's own (direct requests the quota never sees):
      // the share must hold as Stripe counts arrivals, so it is kept with the margin too.
      quota: {
        kind: 'sync',
        syncLimit: syncShare(key, settings.turbo),
        shareMargin: true,
        ...(audit ? { also: { key: `${quotaKey}:audit`, rule: { limit: this.auditShare, windowMs: 1000 } } } : {}),
      },
      signal,
      onRateLimited: this.options.onRateLimited,
    });
  }

  private async loop(): Promise<void> {
    let failures = 0;
    let again = false;
    while (!this.abort.signal.aborted) {
      try {
        const client = this.client(await this.settings());
        await ensureTables(this.options.target, this.options.logger);
        await this.backfill(client, again);
        again = false;
        failures = 0;
        // If either loop fails, the other stops too before the next round starts them again.
        const round = new AbortController();
        const signal = AbortSignal.any([this.abort.signal, round.signal]);
        const stopRound = (error: unknown) => {
          round.abort(error);
          throw error;
        };
        await Promise.all([
          this.follow(signal).catch(stopRound),
          this.upcoming(signal).catch(stopRound),
          this.recheck(client, signal).catch(stopRound),
          this.connected.run(signal).catch(stopRound),
          this.audit.run(signal),
        ]);
      } catch (thrown) {
        if (this.abort.signal.aborted) break;
        const error = toError(thrown);
        if (error instanceof CursorExpired) {
          this.options.logger.warn({ error: error.message }, 'events feed out of reach; backfilling again');
          again = true;
          continue;
        }
        const fatal = error instanceof StripeError && error.kind === 'auth';
        failures++;
        await this.status.failed(error.message, fatal ? 'fatal' : isDiskFull(thrown) ? 'disk_full' : 'transient').catch(() => undefined);
        await pause(fatal ? FATAL_PAUSE_MS : backoffDelay(CYCLE_BACKOFF, failures), this.abort.signal);
      }
    }
  }

  /**
   * The first backfill, a resumed one, or (again) a new one after the feed ran out. A backfill
   * begun here is a pass (every list is read after it began); a resumed one read some pages
   * before this process started, so the feed's first read after it confirms instead.
   */
  private async backfill(client: StripeClient, again: boolean): Promise<void> {
    const pass = await this.status.passStarted();
    const before = Date.now();
    const state = await beginBackfill(client, this.options.target, again);
    if (state.completedAt) return;
    const fresh = state.startedAt >= before;
    const started = new Date(state.startedAt);
    await this.status.cycleStarted(started);
    const result = await runBackfill(
      {
        client,
        db: this.options.target,
        logger: this.options.logger,
        signal: this.abort.signal,
        progress: (p, force) => this.status.progress(p, force),
        incomplete: this.incomplete,
      },
      state,
    );
    await saveState(this.options.target, STRIPE_SCHEMAS, EVENTS_KEY, state.eventsCursor);
    await markAllUpcoming(this.options.target);
    // What the backfill could not read is in the status before it says the backfill completed:
    // a reader of the completed status must not find it without its warnings.
    await this.warnSkipped(result);
    await this.incomplete.settled();
    await this.status.cycleCompleted(started, new Date(), fresh ? pass : undefined);
  }

  /** The warnings are the lists skipped now: those of the creation check, or of a list read since, go. */
  private async warnSkipped(result: BackfillResult): Promise<void> {
    this.warnings.skipped = result.skipped.map((s) => `${s.table} not synced: ${s.list} answered ${s.reason}`);
    await this.showWarnings();
  }

  private async showWarnings(): Promise<void> {
    const { skipped, connect } = this.warnings;
    await this.status.warn([...skipped, ...connect]);
  }

  /**
   * Every recheckSkippedMs, the lists the key could not read are read again (with the lists
   * under their parents): a permission granted since brings them in and ends their warning.
   * A failure here is logged and tried again at the next round; it never holds up the events.
   */
  private async recheck(client: StripeClient, signal: AbortSignal): Promise<void> {
    const every = this.options.recheckSkippedMs ?? RECHECK_SKIPPED_MS;
    while (!signal.aborted) {
      await pause(every, signal);
      if (signal.aborted) return;
      try {
        if ((await reopenSkipped(this.options.target)) === 0) continue;
        const state = await loadState<BackfillState>(this.options.target, STRIPE_SCHEMAS, BACKFILL_KEY);
        // Never `again`: this run reads a few lists, it saw too little to remove anything.
        const result = await runBackfill(
          { client, db: this.options.target, logger: this.options.logger, signal, progress: async () => undefined, incomplete: this.incomplete },
          { ...state!, again: false },
        );
        await this.warnSkipped(result);
      } catch (error) {
        if (signal.aborted) return;
        this.options.logger.warn({ err: toError(error) }, 'reading the lists the key could not read failed; trying again later');
      }
    }
  }

  /**
   * The events feed, read every pollIntervalMs; each read is one "cycle" of `_sync_meta`, and
   * a pass: it reads every event after the cursor and applies them before it ends. (Upcoming
   * invoice previews are refreshed apart from it, and are not part of any pass.)
   */
  private async follow(signal: AbortSignal): Promise<void> {
    const backfill = await loadState<BackfillState>(this.options.target, STRIPE_SCHEMAS, BACKFILL_KEY);
    let cursor = (await loadState<EventsCursor>(this.options.target, STRIPE_SCHEMAS, EVENTS_KEY)) ?? backfill!.eventsCursor;
    let lastMeta = 0;
    let lastEventAt = Date.now();
    let gap = 0;
    // The earliest wanted pass not confirmed yet: it waits for the connected accounts' feeds
    // while this feed goes on being read. (It used to wait in line here, and one account whose
    // feed kept failing left the platform's own feed unread, and every wait unanswered.)
    let waiting: { pass: PassStart; since: number; notes: number } | undefined;
    const { syncId, passRequests } = this.options;
    const intervalMs = this.options.pollIntervalMs ?? 500;
    while (!signal.aborted) {
      // Marked before the read starts, so a request that arrives during it wakes the next one.
      const mark = passRequests?.requestMark(syncId) ?? 0;
      const lastStart = Date.now();
      const pass = await this.status.passStarted();
      const started = new Date();
      const client = this.client(await this.settings(), signal);
      const polled = await pollEvents(client, this.options.target, cursor, { late: { reader: this.late, now: pass.wanted } });
      cursor = polled.cursor;
      // Someone waits: the pass also covers every connected account's feed, read from now on.
      if (pass.wanted && !waiting) {
        waiting = { pass, since: started.getTime(), notes: 0 };
        this.connected.askCaughtUp();
      }
      if (polled.events + polled.late > 0) {
        lastEventAt = Date.now();
        this.wakeUpcoming();
      }
      // A wanted pass is confirmed only with the connected accounts (below).
      const confirms = pass.wanted ? undefined : pass;
      if (polled.events + polled.late > 0 || Date.now() - lastMeta >= META_EVERY_MS) {
        await this.status.cycleStarted(started);
        await this.status.cycleCompleted(started, new Date(), confirms);
        lastMeta = Date.now();
      } else if (confirms) {
        await this.status.passCompleted(confirms);
      }
      gap = nextPollGap({ intervalMs, previousGapMs: gap, sinceEventMs: Date.now() - lastEventAt });
      if (waiting) {
        // Confirmed as soon as the accounts have caught up, within this poll's gap; else at a later look.
        const until = lastStart + intervalMs;
        while (!signal.aborted && !this.connected.isCaughtUp(waiting.since) && Date.now() < until) {
          await this.connected.progressed(until - Date.now(), signal);
        }
        if (this.connected.isCaughtUp(waiting.since)) {
          await this.status.passCompleted(waiting.pass);
          waiting = undefined;
        } else if (Date.now() - waiting.since >= WAIT_NOTE_MS * (waiting.notes + 1)) {
          waiting.notes++;
          this.options.logger.debug(
            { ...this.connected.behind(waiting.since), waitingMs: Date.now() - waiting.since },
            "a wanted pass still waits for the connected accounts' feeds",
          );
        }
      }
      await untilNextPass({ requests: passRequests, syncId, mark, intervalMs: waiting ? intervalMs : gap, lastStart, signal });
    }
  }

  /** Upcoming invoices are extra: a failure here is logged and retried, and never holds up the events. */
  private async upcoming(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const client = this.client(await this.settings(), signal);
        this.upcomingMarked = false;
        const handled = await refreshUpcoming(client, this.options.target);
        if (handled === 0 && !this.upcomingMarked) {
          const marked = new AbortController();
          this.endUpcomingPause = () => marked.abort();
          await pause(UPCOMING_IDLE_MS, AbortSignal.any([signal, marked.signal]));
          this.endUpcomingPause = undefined;
        }
      } catch (error) {
        if (signal.aborted) return;
        this.options.logger.warn({ err: toError(error) }, 'refreshing upcoming invoices failed; retrying');
        await pause(5000, signal);
      }
    }
  }
}
