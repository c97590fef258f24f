import type pg from 'pg';
import type { Logger } from '../log.ts';
import { confirmPass, passStarted, PASSES_CHANNEL, type PassStart } from './passes.ts';
import { recordCycleEnd, recordCycleStart } from '../writer/sync-meta.ts';
import type { SyncSchemas } from '../syncdb/schemas.ts';
import type { IncompleteList } from '../control/status-fields.ts';
import type { Liveness } from './liveness.ts';

/** `disk_full`: the sync database's server is out of disk space (red at once; tried again). */
export type ErrorKind = 'transient' | 'fatal' | 'disk_full';

/** How often a sync adds a sample to its cycle history (sync_cycles, the console's chart). */
export const HISTORY_EVERY_MS = 5_000;
/**
 * How often a pass nobody waits for is still recorded (confirmed_through): the status's lag is
 * measured from it, so a sync whose changes arrive by its feed or change capture shows the age
 * of those reads, not of its last full sweep. A write every few seconds, not one a pass.
 */
export const CONFIRM_EVERY_MS = 5_000;
/** Failed cycle attempts a sync keeps in sync_errors (the console shows the last 20). */
export const MAX_RECENT_ERRORS = 100;

/**
 * Where a sync says how it is doing: the control database (API, console, indicator)
 * and the sync database's `_sync_meta` (how SQL users tell that the sync is running).
 */
export class StatusReporter {
  private lastProgressAt = 0;
  /** The latest progress write: a cycle's end waits for it, so a late one cannot undo the clearing. */
  private progressWrite: Promise<unknown> = Promise.resolve();
  /** The running pass's latest progress; a completed cycle clears it. */
  private passProgress: Record<string, unknown> | null = null;
  /** Progress of work beside the cycles (Stripe's connected accounts): a completed cycle keeps it. */
  private standing: Record<string, unknown> = {};
  private waitingWrite: Promise<unknown> | undefined;
  private confirmedAt = 0;
  private readonly history = { previousStart: undefined as Date | undefined, passBegan: 0, cycles: 0, lagSeconds: 0, durationSeconds: 0, writtenAt: 0 };

  constructor(
    private readonly options: {
      control: pg.Pool;
      target: pg.Pool;
      schemas: SyncSchemas;
      syncId: string;
      logger: Logger;
      /** Told of every report: the service restarts a runner silent past its bound. */
      liveness?: Liveness;
    },
  ) {}

  private beat(): void {
    this.options.liveness?.beat();
  }

  async cycleStarted(at: Date): Promise<void> {
    this.beat();
    await this.options.control.query('UPDATE syncs SET started_at = $2 WHERE id = $1', [this.options.syncId, at]);
    await recordCycleStart(this.options.target, this.options.schemas, at);
  }

  /**
   * Before a pass reads anything upstream: its start on the control database's clock, and
   * whether someone waits for it (src/sync/passes.ts).
   */
  passStarted(): Promise<PassStart> {
    this.beat();
    return passStarted(this.options.control, this.options.syncId);
  }

  /**
   * A pass that left the database holding everything upstream had at its start: written at once
   * when someone waits, else every CONFIRM_EVERY_MS (the status's lag is read from it).
   */
  async passCompleted(pass: PassStart): Promise<void> {
    this.beat();
    this.history.passBegan = Math.max(this.history.passBegan, Date.parse(pass.at));
    if (!pass.wanted && Date.now() - this.confirmedAt < CONFIRM_EVERY_MS) return;
    this.confirmedAt = Date.now();
    await confirmPass(this.options.control, this.options.syncId, pass);
  }

  /**
   * A finished cycle also clears the error: the indicator returns to normal. `confirms`: the
   * cycle was also a complete pass (recorded whether or not anyone waits, as this writes anyway).
   */
  async cycleCompleted(started: Date, finished: Date, confirms?: PassStart): Promise<void> {
    this.beat();
    const seconds = (finished.getTime() - started.getTime()) / 1000;
    await this.progressWrite.catch(() => undefined);
    await recordCycleEnd(this.options.target, this.options.schemas, finished, seconds);
    this.passProgress = null;
    // In line with the progress writes: a standing change made meanwhile lands after this.
    await this.inLine(() =>
      this.options.control.query(
        `WITH c AS (
           UPDATE syncs SET completed_at = $2, duration_last = make_interval(secs => $3),
                  duration_usual = CASE WHEN duration_usual IS NULL THEN make_interval(secs => $3)
                                        ELSE duration_usual * 0.8 + make_interval(secs => $3) * 0.2 END,
                  last_error = NULL, last_error_at = NULL, last_error_kind = NULL, progress = $5::jsonb,
                  confirmed_through = GREATEST(confirmed_through, $4::timestamptz)
            WHERE id = $1 RETURNING id)
         SELECT pg_notify('${PASSES_CHANNEL}', id) FROM c WHERE $4::timestamptz IS NOT NULL`,
        [this.options.syncId, finished, seconds, confirms?.at ?? null, this.shownProgress()],
      ),
    );
    await this.recordCycle(started, finished, confirms);
  }

  /**
   * The console's lag and cycle-time chart: one sample per HISTORY_EVERY_MS at most, holding
   * the worst lag and the longest cycle since the last sample. The lag is the status's: a
   * completion minus the start of the latest pass known complete or of the previous cycle,
   * whichever is later (a paced sweep's cycles are a minute apart, change capture's passes a
   * few seconds; the chart once showed 80 s beside a status lag of 0.1 s). Best effort: the
   * chart is not worth failing a cycle.
   */
  private async recordCycle(started: Date, finished: Date, confirms?: PassStart): Promise<void> {
    const history = this.history;
    history.cycles++;
    if (confirms) history.passBegan = Math.max(history.passBegan, Date.parse(confirms.at));
    const from = Math.max((history.previousStart ?? started).getTime(), history.passBegan);
    history.lagSeconds = Math.max(history.lagSeconds, Math.max(0, finished.getTime() - from) / 1000);
    history.durationSeconds = Math.max(history.durationSeconds, (finished.getTime() - started.getTime()) / 1000);
    history.previousStart = started;
    if (finished.getTime() - history.writtenAt < HISTORY_EVERY_MS) return;
    const sample = [this.options.syncId, finished, history.cycles, history.lagSeconds, history.durationSeconds];
    Object.assign(history, { cycles: 0, lagSeconds: 0, durationSeconds: 0, writtenAt: finished.getTime() });
    try {
      await this.options.control.query(
        `WITH pruned AS (DELETE FROM sync_cycles WHERE sync_id = $1 AND at < $2::timestamptz - interval '1 day')
         INSERT INTO sync_cycles (sync_id, at, cycles, lag_s, duration_s)
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM syncs WHERE id = $1) ON CONFLICT DO NOTHING`,
        sample,
      );
    } catch (err) {
      this.options.logger.debug({ err }, 'could not record the cycle in the console history');
    }
  }

  async failed(message: string, kind: ErrorKind): Promise<void> {
    this.beat();
    this.options.logger.warn({ kind, error: message }, 'sync cycle failed');
    // The status and a row of the console's recent errors (a day of them, the newest
    // MAX_RECENT_ERRORS at most: a sync failing fast cannot fill the table), in one statement.
    await this.options.control.query(
      `WITH updated AS (
         UPDATE syncs SET last_error = $2, last_error_at = now(), last_error_kind = $3 WHERE id = $1 RETURNING id),
       pruned AS (
         DELETE FROM sync_errors WHERE sync_id = $1
            AND (at < now() - interval '1 day'
                 OR at <= (SELECT at FROM sync_errors WHERE sync_id = $1 ORDER BY at DESC OFFSET $4 - 1 LIMIT 1)))
       INSERT INTO sync_errors (sync_id, kind, message) SELECT id, $3, $2 FROM updated`,
      [this.options.syncId, message.slice(0, 1000), kind, MAX_RECENT_ERRORS],
    );
  }

  /** The sweep's pace (Airtable): seconds a paced cycle is spread over, or null for the full pace. */
  async pace(seconds: number | null): Promise<void> {
    await this.options.control.query('UPDATE syncs SET paced_cycle_s = $2 WHERE id = $1', [this.options.syncId, seconds]);
  }

  /**
   * What the key cannot read (objects skipped), for the sync's view, kept apart from errors.
   * The whole set: a note whose cause is gone (the permission was granted) goes with it.
   */
  async warn(warnings: string[]): Promise<void> {
    await this.options.control.query('UPDATE syncs SET upstream_warnings = ARRAY(SELECT DISTINCT w FROM unnest($2::text[]) AS w ORDER BY w) WHERE id = $1', [
      this.options.syncId,
      warnings,
    ]);
  }

  /** The lists that cannot be read completely right now, and why (the whole set; empty once all are). */
  async incomplete(lists: IncompleteList[]): Promise<void> {
    await this.options.control.query('UPDATE syncs SET incomplete = $2::jsonb WHERE id = $1', [this.options.syncId, JSON.stringify(lists)]);
  }

  /** Throttled: progress is for people watching, once a second is plenty. */
  async progress(progress: Record<string, unknown>, force = false): Promise<void> {
    this.beat();
    this.passProgress = progress;
    const now = Date.now();
    if (!force && now - this.lastProgressAt < 1000) return;
    this.lastProgressAt = now;
    await this.writeProgress();
  }

  /**
   * Fields shown with every pass's progress, and alone between passes, until changed (an
   * empty object removes them): the progress of work that runs beside the cycles.
   */
  async standingProgress(fields: Record<string, unknown>): Promise<void> {
    this.beat();
    this.standing = fields;
    await this.writeProgress();
  }

  /** The pass's progress with the standing fields; null when there is neither. */
  private shownProgress(): string | null {
    const shown = { ...this.passProgress, ...this.standing };
    return Object.keys(shown).length > 0 ? JSON.stringify(shown) : null;
  }

  private writeProgress(): Promise<unknown> {
    // One write waiting its turn is enough (many accounts change at once): it writes what is current then.
    this.waitingWrite ??= this.inLine(() => {
      this.waitingWrite = undefined;
      return this.options.control.query('UPDATE syncs SET progress = $2::jsonb WHERE id = $1', [this.options.syncId, this.shownProgress()]);
    });
    return this.waitingWrite;
  }

  /** Progress writes one after another, each with what is current when its turn comes. */
  private inLine(write: () => Promise<unknown>): Promise<unknown> {
    this.progressWrite = this.progressWrite.catch(() => undefined).then(write);
    return this.progressWrite;
  }
}
