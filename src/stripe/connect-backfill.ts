import type pg from 'pg';
import type { Limited } from '../semaphore.ts';
import type { Logger } from '../log.ts';
import { saveState } from '../sync/state.ts';
import { beginBackfill, runBackfill } from './backfill.ts';
import type { StripeClient } from './client.ts';
import type { AccountsProgress } from './connect-progress.ts';
import { STRIPE_SCHEMAS } from './migrations.ts';
import { stateKeys } from './scope.ts';

/** Connected accounts' backfills: how many run, and the slots they share. */
export class AccountBackfills {
  /** Backfills running now: connected feeds are read more slowly meanwhile. */
  running = 0;

  constructor(
    private readonly slots: Limited,
    private readonly progress: AccountsProgress,
  ) {}

  /**
   * The account's backfill, unless complete (`again`: a new one, its feed having run out), in
   * two parts: its core tables, then the rest, queued behind every account's first part, so
   * all accounts' core tables are ready first.
   */
  async run(options: { client: StripeClient; db: pg.Pool; logger: Logger; signal: AbortSignal; again: boolean }): Promise<void> {
    const { client, db, again } = options;
    const account = client.account!;
    const backfill = { ...options, progress: async (p: Record<string, unknown>) => this.progress.landed(account, p) };
    await this.slots(() =>
      this.counted(async () => {
        const state = await beginBackfill(client, db, again);
        if (state.completedAt) return;
        this.progress.backfilling(account);
        await runBackfill({ ...backfill, firstOnly: true }, state);
      }),
    );
    this.progress.coreReady(account);
    await this.slots(
      () =>
        this.counted(async () => {
          const state = await beginBackfill(client, db, false);
          if (state.completedAt) return;
          await runBackfill(backfill, state);
          await saveState(db, STRIPE_SCHEMAS, stateKeys(account).events, state.eventsCursor);
        }),
      1,
    );
    await this.progress.backfilled(account);
  }

  private async counted(work: () => Promise<void>): Promise<void> {
    this.running++;
    try {
      await work();
    } finally {
      this.running--;
    }
  }
}
