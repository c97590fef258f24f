import type pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';

/** One running sync: started once, stopped when its lease is lost or the process ends. */
export interface Runner {
  start(): void;
  stop(): Promise<void>;
}

/** Syncs one process runs at most, unless TRIBUTARY_MAX_SYNCS_PER_PROCESS says otherwise. */
export const DEFAULT_MAX_SYNCS = 1000;

export interface LeaseWorkerOptions {
  control: pg.Pool;
  workerId: string;
  logger: Logger;
  makeRunner(syncId: string): Promise<Runner>;
  /** How often leases are renewed and new syncs claimed. */
  tickMs?: number;
  /** A lease not renewed for this long lets another worker take the sync. */
  leaseMs?: number;
  /** Syncs this process runs at most (TRIBUTARY_MAX_SYNCS_PER_PROCESS); the rest wait for another process. */
  maxSyncs?: number;
  /** The lease columns of syncs: the sync runner's by default; the decoder has its own. */
  lease?: { owner: string; until: string };
  /** A constant SQL condition on the syncs a worker may claim (the decoder: those that made their database). */
  claimable?: string;
}

/**
 * Claims syncs with leases in the control database (FOR UPDATE SKIP LOCKED), so any
 * number of processes share the work and a dead one's syncs move on once its leases
 * lapse. A sync that is deleted, or whose lease another worker took, is stopped here.
 */
export class LeaseWorker {
  private readonly runners = new Map<string, Runner>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private stopped = false;
  private inTick = false;
  /** claimSoon() was called during a tick: the next one starts right after it. */
  private claimAgain = false;
  private lastFullWarning = 0;
  /** When the held leases were last renewed. */
  private renewedAt = 0;

  constructor(private readonly options: LeaseWorkerOptions) {}

  start(): void {
    this.loop();
  }

  private loop(): void {
    this.inTick = true;
    this.ticking = this.tick()
      .catch((err: unknown) => this.options.logger.warn({ err: toError(err) }, 'lease worker tick failed'))
      .finally(() => {
        this.inTick = false;
        if (this.stopped) return;
        const again = this.claimAgain;
        this.claimAgain = false;
        this.timer = setTimeout(() => this.loop(), again ? 0 : (this.options.tickMs ?? 2000));
      });
  }

  /** A sync became ready to run: claim now instead of at the next tick (once more if a tick is running). */
  claimSoon(): void {
    if (this.stopped) return;
    if (this.inTick) {
      this.claimAgain = true;
      return;
    }
    clearTimeout(this.timer);
    this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    await Promise.all([...this.runners.values()].map((r) => r.stop()));
    const ids = [...this.runners.keys()];
    this.runners.clear();
    // Hand the syncs over at once instead of making the next worker wait out the lease.
    const { owner, until } = this.lease;
    await this.options.control
      .query(`UPDATE syncs SET ${owner} = NULL, ${until} = NULL WHERE id = ANY($1) AND ${owner} = $2`, [ids, this.options.workerId])
      .catch(() => undefined);
  }

  /** Running syncs, for tests and metrics. */
  get syncIds(): string[] {
    return [...this.runners.keys()];
  }

  private get lease(): { owner: string; until: string } {
    return this.options.lease ?? { owner: 'lease_owner', until: 'lease_until' };
  }

  private async tick(): Promise<void> {
    const { control, workerId } = this.options;
    const { owner, until } = this.lease;
    const leaseMs = this.options.leaseMs ?? 30_000;
    // Renewed every third of the lease, which leaves two renewals' room before it lapses: a
    // renewal rewrites each sync's row, and at every tick that was most of the control
    // database's writes. Whether a sync was deleted or taken over is still read at every tick.
    const now = Date.now();
    const renew = now - this.renewedAt >= leaseMs / 3;
    const renewed = await control.query<{ id: string }>(
      renew
        ? `UPDATE syncs SET ${until} = now() + make_interval(secs => $3 / 1000.0)
            WHERE id = ANY($1) AND ${owner} = $2 AND state = 'active' RETURNING id`
        : `SELECT id FROM syncs WHERE id = ANY($1) AND ${owner} = $2 AND state = 'active'`,
      renew ? [[...this.runners.keys()], workerId, leaseMs] : [[...this.runners.keys()], workerId],
    );
    if (renew) this.renewedAt = now;
    const kept = new Set(renewed.rows.map((r) => r.id));
    for (const [id, runner] of this.runners) {
      if (kept.has(id)) continue;
      this.runners.delete(id);
      this.options.logger.info({ sync: id }, 'sync deleted or taken over; stopping it here');
      await runner.stop();
      // Stopped: a delete waiting for it drops the database now, not under a running sync.
      await control.query(`UPDATE syncs SET ${owner} = NULL, ${until} = NULL WHERE id = $1 AND ${owner} = $2`, [id, workerId]).catch(() => undefined);
    }
    if (this.stopped) return;
    const room = (this.options.maxSyncs ?? DEFAULT_MAX_SYNCS) - this.runners.size;
    if (room <= 0) return this.warnIfFull();
    const claimed = await control.query<{ id: string }>(
      `UPDATE syncs SET ${owner} = $1, ${until} = now() + make_interval(secs => $2 / 1000.0)
        WHERE id IN (SELECT id FROM syncs
                      WHERE state = 'active' AND (${until} IS NULL OR ${until} < now()) AND (${this.options.claimable ?? 'true'})
                      ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
        RETURNING id`,
      [workerId, leaseMs, room],
    );
    for (const { id } of claimed.rows) {
      try {
        const runner = await this.options.makeRunner(id);
        this.runners.set(id, runner);
        runner.start();
        this.options.logger.info({ sync: id }, 'sync started');
      } catch (err) {
        this.options.logger.error({ err: toError(err), sync: id }, 'sync could not start; retrying after its lease');
      }
    }
  }

  /**
   * A full process leaves the syncs nobody runs waiting, which nothing else would show:
   * said in the log (once a minute) with how many wait, so the operator adds a process.
   */
  private async warnIfFull(): Promise<void> {
    if (Date.now() - this.lastFullWarning < 60_000) return;
    const { owner, until } = this.lease;
    const { rows } = await this.options.control.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM syncs WHERE state = 'active' AND (${until} IS NULL OR ${until} < now()) AND (${this.options.claimable ?? 'true'})`,
    );
    if (rows[0]!.n === 0) return;
    this.lastFullWarning = Date.now();
    this.options.logger.warn(
      { running: this.runners.size, waiting: rows[0]!.n, lease: owner },
      'this process runs its maximum of syncs (TRIBUTARY_MAX_SYNCS_PER_PROCESS); the waiting ones need another process',
    );
  }
}

/**
 * Frees every lease, sync and decoder alike. Only for a control database whose server this
 * process has just started (the embedded one, found stopped): every process that held a lease
 * lost its connection with the server, and a killed container's successor need not wait out
 * the leases of the process that died with it. A holder still alive somewhere loses the sync
 * at its next renewal, as when any lease lapses.
 */
export async function releaseLeasesOfStoppedServer(control: pg.Pool, logger: Logger): Promise<void> {
  const { rowCount } = await control.query(
    `UPDATE syncs SET lease_owner = NULL, lease_until = NULL, decoder_lease_owner = NULL, decoder_lease_until = NULL
      WHERE lease_owner IS NOT NULL OR decoder_lease_owner IS NOT NULL`,
  );
  if (rowCount) logger.info({ syncs: rowCount }, 'released the leases of processes that stopped with the embedded PostgreSQL');
}
