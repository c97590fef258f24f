import type { SyncAttachmentLinks } from '../attachments/links.ts';
import { isDiskFull } from '../db/transient.ts';
import type { Liveness } from '../sync/liveness.ts';
import type pg from 'pg';
import type { Secret } from '../control/secrets.ts';
import type { AirtableSettings } from './settings.ts';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { type PassRequests, untilNextPass } from '../sync/passes.ts';
import { StatusReporter } from '../sync/status-reporter.ts';
import { backoffDelay, CYCLE_BACKOFF, FATAL_PAUSE_MS } from '../retry.ts';
import { pause } from '../time.ts';
import { pruneMarks } from '../writer/marks.ts';
import { AIRTABLE_RULE, AIRTABLE_USER_SYNC_SHARE, AirtableClient, AirtableError, syncQuota } from './client.ts';
import { planMigration } from './plan.ts';
import { mapBase } from './schema.ts';
import { sweepTable, type SweepContext } from './sweep.ts';
import { dropTable, prepareRebuild, refreshComments } from '../writer/swap.ts';
import { builtTable, loadBuilt, shapeOf } from './tables.ts';
import { type DriftCounts, DriftLog } from '../control/drift.ts';
import { ensureWebhook } from './webhook.ts';
import { ChangeCapture } from './capture.ts';
import { RecordTurns } from './record-turns.ts';
import { CyclePace } from './pace.ts';
import { RefetchQueue } from './refetch-queue.ts';
import { AirtableSyncState, interruptible } from './sync-state.ts';
import { swapInAfterProxiedWrites } from './swap-rounds.ts';
import { TokenOwners } from './owners.ts';
import { UserLimitWatch } from './user-limit.ts';
import type { SyncSchemas } from '../syncdb/schemas.ts';
import type { SyncHooks } from '../kinds/kind.ts';

export interface AirtableRunnerOptions {
  syncId: string;
  /** Told of every status the runner reports (sync/liveness.ts). */
  liveness?: Liveness;
  baseId: string;
  /** Control database (status) and the sync's own database (data). */
  control: pg.Pool;
  target: pg.Pool;
  schemas: SyncSchemas;
  token: Secret;
  baseUrl: string;
  limiter?: QuotaLimiter;
  loadSettings(): Promise<AirtableSettings>;
  logger: Logger;
  /** How often webhook payloads are read; each read costs one request of the sync's quota. */
  pollIntervalMs?: number;
  /** How often while Airtable's pings arrive (default PINGED_POLL_MS, capture.ts). */
  pingedPollIntervalMs?: number;
  /** Where Airtable may ping (the service's public URL), and where its secret is kept. */
  hooks?: SyncHooks;
  /** Pause between cycles (0: the next cycle starts at once, a continuous sync). */
  cycleGapMs?: number;
  /**
   * While change capture is healthy and the latest cycle found nothing it had missed, a cycle's
   * requests are spread over this long (pace.ts); 0: always the full pace. Default PACED_CYCLE_MS.
   */
  pacedCycleMs?: number;
  /** Change capture through Airtable webhooks; off means sweeps alone. */
  changeCapture?: boolean;
  /** Time scale of the upstream (benchmarks against a sped-up fake); 1 in production. */
  timeScale?: number;
  /** Wait requests for this sync, which start the next pass early (PassSignals). */
  passRequests?: PassRequests;
  /** Told of every 429 Airtable answers the sync. */
  onRateLimited?: (note: string) => void;
  /** The syncs' share of their user's 50 requests a second (default AIRTABLE_USER_SYNC_SHARE). */
  userSyncShare?: number;
  /** The sync's stable attachment links (its setting `stable_attachment_links` puts them in the columns). */
  attachmentLinks?: SyncAttachmentLinks;
}

const RECENT_TTL_MS = 10 * 60_000;
/** A paced cycle's target duration: what change capture cannot see is at most about this late. */
export const PACED_CYCLE_MS = 60_000;

/**
 * Keeps one base in step: continuous cycles (schema, then every table swept or rebuilt)
 * and, between them, change capture from the base's webhook payloads, so an edit lands
 * in seconds whatever the base's size. The sweep stays the source of truth for deletes
 * it can prove and for computed fields that change without an edit.
 */
export class AirtableRunner {
  private readonly abort = new AbortController();
  readonly status: StatusReporter;
  /** Debounced records and fetches held back for proxied writes (refetch-queue.ts). */
  readonly queue: RefetchQueue;
  /** What the cycle loop, change capture and the refetch queue share about the base. */
  private readonly state = new AirtableSyncState();
  /** Change capture from the base's webhook payloads (capture.ts). */
  private readonly capture: ChangeCapture;
  /** Fetches by id and capture's deletes, in turn. */
  private readonly turns: RecordTurns;
  private running: Promise<void> | undefined;
  /** Ends the pause between cycles early, while there is one. */
  private endPause: (() => void) | undefined;
  /** Sweeps spread out while change capture is proven (pace.ts). */
  private readonly pace: CyclePace;
  /** The token's user, whose quota (all of the user's tokens, every base) each request also counts against. */
  private readonly owners: TokenOwners;
  /** Whether that quota slows the sync (its status says so). */
  private readonly userLimit: UserLimitWatch;
  /** What each sweep found that change capture had not brought (sql/36_drift.sql). */
  private readonly drift: DriftLog;

  constructor(readonly options: AirtableRunnerOptions) {
    const { control, target, schemas, syncId, logger } = options;
    this.status = new StatusReporter({ control, target, schemas, syncId, logger, liveness: options.liveness });
    this.drift = new DriftLog(control, syncId, 'sweep');
    this.turns = new RecordTurns({ state: this.state, target, schemas, links: options.attachmentLinks, queue: () => this.queue });
    this.queue = new RefetchQueue({
      fetch: (tableId, ids) => this.refetch(this.client(true), tableId, ids),
      // Left to the sweep, which no longer skips them: until a new cycle, no capture poll is a pass.
      onFailed: () => this.state.needCycle(),
      onDrained: () => this.capture.pollWanted && this.capture.pollSoon(),
      logger: options.logger,
    });
    this.capture = new ChangeCapture(this.state, this);
    this.pace = new CyclePace({
      cycleMs: (options.pacedCycleMs ?? PACED_CYCLE_MS) / (options.timeScale ?? 1),
      healthy: () => this.capture.healthy,
      urgent: async () =>
        this.state.needsCycle !== 0 || this.capture.pollWanted || JSON.stringify(await this.options.loadSettings()) !== JSON.stringify(this.state.settings),
      report: (seconds) => this.status.pace(seconds),
      signal: this.signal,
    });
    this.owners = new TokenOwners({ pool: options.control });
    const share = options.userSyncShare ?? AIRTABLE_USER_SYNC_SHARE;
    this.userLimit = new UserLimitWatch({ control: options.control, syncId: options.syncId, logger: options.logger, share });
  }

  start(): void {
    const loops = [this.cycleLoop(), this.capture.run(), this.queue.run(this.signal, () => this.state.settings !== undefined)];
    this.running = Promise.all(loops).then(() => undefined);
  }

  async stop(): Promise<void> {
    this.abort.abort(new Error('sync stopped'));
    await this.running;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** `urgent` (asked at each request when a function): change capture someone waits on goes before sweep pages. */
  client(urgent: boolean | (() => boolean) = false): AirtableClient {
    const settings = this.state.settings!;
    return new AirtableClient({
      baseUrl: this.options.baseUrl,
      token: this.options.token,
      baseId: this.options.baseId,
      limiter: this.options.limiter,
      // The seed's shares of the base's 5 req/s: 3 by default, all 5 with Turbo. The rest is
      // the customer's, who may write to Airtable directly (then wait): requests the quota
      // never sees, so the share must hold as Airtable counts arrivals (a 429 locks the base
      // out for 30 s).
      quota: syncQuota(settings.turbo ? 5 : 3, urgent),
      signal: this.signal,
      onRateLimited: this.options.onRateLimited,
      // A sync made before users were recorded learns its token's user at its first request.
      owners: this.owners,
      learnOwner: true,
      userSyncLimit: this.userLimit.share,
      onGranted: (heldMs) => this.userLimit.granted(heldMs),
      ...(this.options.timeScale && this.options.timeScale !== 1
        ? { rule: { ...AIRTABLE_RULE, windowMs: AIRTABLE_RULE.windowMs / this.options.timeScale }, lockoutMs: 30_000 / this.options.timeScale }
        : {}),
    });
  }

  private async cycleLoop(): Promise<void> {
    let failures = 0;
    while (!this.signal.aborted) {
      const mark = this.options.passRequests?.requestMark(this.options.syncId) ?? 0;
      const began = Date.now();
      try {
        this.state.settings = await this.options.loadSettings();
        await this.cycle(this.client());
        failures = 0;
        const gap = this.options.cycleGapMs ?? 0;
        if (gap > 0) await this.betweenCycles(gap, mark, began);
      } catch (thrown) {
        if (this.signal.aborted) break;
        let error = toError(thrown);
        let fatal = error instanceof AirtableError && error.kind === 'auth';
        if (fatal && (await this.modelWentAway(error))) {
          fatal = false;
          error = new Error('a table or field was deleted upstream during the cycle; the next cycle follows the new schema', { cause: error });
        }
        failures++;
        await this.status.failed(error.message, fatal ? 'fatal' : isDiskFull(thrown) ? 'disk_full' : 'transient').catch(() => undefined);
        await pause(fatal ? FATAL_PAUSE_MS : backoffDelay(CYCLE_BACKOFF, failures), this.signal);
      }
    }
  }

  /**
   * A 403 while the base's schema still reads: Airtable's answer for a table deleted since the
   * cycle read the schema (INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND), not a key that lost the base.
   */
  private async modelWentAway(error: Error): Promise<boolean> {
    if (!(error instanceof AirtableError && error.status === 403) || !this.state.settings) return false;
    try {
      await this.client().schema();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The pause between cycles. A waiter is normally served by the next capture poll; without
   * change capture a wait request ends the pause, and so does a capture poll that someone
   * waits on but that only a cycle can complete (endGap).
   */
  private async betweenCycles(gapMs: number, mark: number, began: number): Promise<void> {
    const requests = this.state.webhook ? undefined : this.options.passRequests;
    await interruptible(
      this.signal,
      (end) => (this.endPause = end),
      (signal) => untilNextPass({ requests, syncId: this.options.syncId, mark, intervalMs: gapMs, lastStart: began, signal }),
    );
  }

  /** Ends the pause between cycles: a capture poll someone waits on needs a cycle. */
  endGap(): void {
    this.endPause?.();
  }

  /**
   * A cycle is a pass: everything it writes was read after it started, so when it completes
   * the database holds everything upstream had at its start, unless debounced records are
   * still held back (or one of their writes failed meanwhile).
   */
  private async cycle(client: AirtableClient): Promise<void> {
    const settings = this.state.settings!;
    const requestMark = this.options.passRequests?.requestMark(this.options.syncId) ?? 0;
    const pass = await this.status.passStarted();
    const number = ++this.state.cyclesBegun;
    const failuresAtStart = this.queue.failures;
    const started = new Date();
    await this.status.cycleStarted(started);
    const { schemas } = this.options;
    // Known before the webhook is: a payload read meanwhile (a runner taking over a built sync) finds its tables.
    const built = await loadBuilt(this.options.target, schemas);
    this.state.live = new Map(built);
    if (this.options.changeCapture !== false) {
      // Before listing: every change from here on is either in the listing or in a payload.
      const previous = this.state.webhook?.id;
      this.state.webhook = await ensureWebhook(client, this.options.target, this.options.schemas, this.options.logger, this.options.hooks);
      // A webhook new to this runner: what happened before it is only in this cycle's listing.
      if (this.state.webhook && this.state.webhook.id !== previous) this.state.needsCycle = Math.max(this.state.needsCycle, number);
    }
    await this.pace.begin();
    await this.pace.turn();
    const desired = mapBase(await client.schema(), settings);
    const plan = planMigration(desired, built);
    if (plan.drop.length + plan.rebuild.length > 0) this.pace.missed();
    for (const gone of plan.drop) {
      await dropTable(this.options.target, builtTable(gone, schemas));
      this.state.live.delete(gone.tableId);
    }

    const rebuild = new Set(plan.rebuild.map((m) => m.tableId));
    // Payloads wait (Airtable keeps them a week) while nothing is live: the quota goes to the load.
    this.state.loading = plan.sweep.length + plan.recomment.length === 0;
    const recomment = new Set(plan.recomment.map((m) => m.tableId));
    let records = 0;
    const swept: Array<{ table: string; at: Date }> = [];
    const found = new Map<string, DriftCounts>();
    try {
      for (const [index, mapping] of desired.entries()) {
        // Progress is for the console: a control database away for a moment must not abort a rebuild.
        const progress = (phase: string, listed: number) =>
          this.status
            .progress({ phase, table: mapping.name, tables_done: index, tables_total: desired.length, records: records + listed })
            .catch((error: unknown) => this.options.logger.debug({ err: toError(error) }, 'could not record progress'));
        if (rebuild.has(mapping.tableId)) {
          const rebuildFrom = Date.now();
          this.state.rebuilding.set(mapping.tableId, new Set());
          let result: Awaited<ReturnType<typeof sweepTable>>;
          let leftover: string[];
          try {
            await prepareRebuild(this.options.target, builtTable(mapping, schemas));
            result = await sweepTable(
              this.sweepContext(client, (n) => progress('rebuild', n)),
              mapping,
              schemas.swap,
              {
                deleteMissing: false,
              },
            );
            leftover = await swapInAfterProxiedWrites(
              {
                target: this.options.target,
                schemas,
                signal: this.signal,
                logger: this.options.logger,
                refetch: (ids) => this.turns.refetchInto(client, mapping, schemas.swap, ids),
              },
              mapping,
              rebuildFrom,
            );
          } catch (error) {
            // The old table stays live: changes meanwhile go to it, not to a set nobody reads.
            this.state.rebuilding.delete(mapping.tableId);
            throw error;
          }
          this.state.live.set(mapping.tableId, mapping);
          const changed = this.state.rebuilding.get(mapping.tableId)!;
          this.state.rebuilding.delete(mapping.tableId);
          if (changed.size > 0) await this.refetch(client, mapping.tableId, [...changed]);
          this.queue.hold(mapping.tableId, leftover);
          records += result.listed;
          this.options.logger.info({ table: mapping.name, records: result.listed }, 'table built and swapped in');
        } else {
          if (recomment.has(mapping.tableId)) await refreshComments(this.options.target, builtTable(mapping, schemas));
          this.state.live.set(mapping.tableId, mapping);
          const sweptAt = new Date();
          const result = await sweepTable(
            this.sweepContext(client, (n) => progress('sweep', n)),
            mapping,
            schemas.live,
            {
              deleteMissing: true,
            },
          );
          records += result.listed;
          // What the sweep wrote is what change capture had not brought: drift, by the status's count.
          const table = shapeOf(mapping, schemas.live).name;
          swept.push({ table, at: sweptAt });
          found.set(table, { missing: result.inserted, differing: result.written - result.inserted, extra: result.deleted });
          if (result.written || result.deleted) {
            this.pace.missed();
            this.options.logger.debug({ table: mapping.name, written: result.written, deleted: result.deleted }, 'table swept');
          }
        }
      }
    } finally {
      // Also after a failure midway: what the tables swept so far found was fixed, and counts.
      await this.drift.compared(swept, found).catch((error: unknown) => this.options.logger.debug({ err: toError(error) }, 'could not record the drift'));
    }
    await this.pruneRecent();
    this.pace.end();
    this.state.loading = false;
    if (this.state.needsCycle !== 0 && number >= this.state.needsCycle) this.state.needsCycle = 0;
    const isPass = this.isPass(failuresAtStart, 'cycle');
    await this.status.cycleCompleted(started, new Date(), isPass ? pass : undefined);
    if (isPass) this.capture.served(requestMark);
    if (this.capture.captureParked || this.capture.pollWanted || this.capture.requestPending) this.capture.pollSoon();
  }

  private sweepContext(client: AirtableClient, onPage: (listed: number) => Promise<void>): SweepContext {
    return {
      airtable: { listPage: (tableId, options) => this.pace.turn().then(() => client.listPage(tableId, options)) },
      db: this.options.target,
      schemas: this.options.schemas,
      logger: this.options.logger,
      links: this.options.attachmentLinks,
      onPage,
      skip: (tableId, id, fetchedAt) => this.queue.has(tableId, id) || this.state.touchedSince(tableId, id, fetchedAt),
      held: (tableId, ids) => this.queue.hold(tableId, ids),
      unproven: (tableId, ids) => this.queue.fetchSoon(tableId, ids),
    };
  }

  private async pruneRecent(): Promise<void> {
    this.state.forgetTouched(Date.now() - RECENT_TTL_MS);
    // The proxy's marks (writer/marks.ts), made by whichever process proxied the writes.
    const { target, schemas, logger } = this.options;
    await pruneMarks(target, schemas).catch((error: unknown) => logger.debug({ err: toError(error) }, 'could not prune write marks'));
  }

  /** Change capture's and the cycle's fetches by id, and capture's deletes, one at a time (record-turns.ts). */
  refetch(client: AirtableClient, tableId: string, ids: string[]): Promise<void> {
    return this.turns.refetch(client, tableId, ids);
  }

  deleteInTurn(tableId: string, ids: string[]): Promise<void> {
    return this.turns.deleteInTurn(tableId, ids);
  }

  /**
   * The pass rule, written once. A cycle is a pass (everything it writes was read after it
   * started) and a capture poll is one (everything it read is written) unless the refetch queue
   * still holds records back or one of its writes failed meanwhile; a poll is also none while
   * a table is being rebuilt or something only a full cycle catches is missed (needsCycle).
   */
  isPass(failuresAtStart: number, kind: 'cycle' | 'poll'): boolean {
    if (!this.queue.quietSince(failuresAtStart)) return false;
    return kind === 'cycle' || (this.state.needsCycle === 0 && this.state.nothingRebuilding);
  }
}
