import type pg from 'pg';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';

/** How often a sync asks again whether another sync follows its base. */
const RECHECK_MS = 60_000;

/**
 * Whether a sync is the only one following its base (any account's): then its timer polls of
 * the webhook go before sweep pages. A poll a second takes a slot a second either way, so for
 * a sync alone on its base the order changes its change lag, not its sweep's pace. With
 * several, every sync's timer polls going first would leave the cycles, which alone read the
 * schema, the one slot a window the quota promises sweeps (test/airtable.shared-base.test.ts):
 * their polls stay ordinary requests.
 */
export class SoleSync {
  private sole = false;
  private checkedAt = 0;
  private checking: Promise<void> | undefined;

  constructor(private readonly options: { control: pg.Pool; syncId: string; logger: Logger }) {}

  /** The latest answer (false until the first); asks again in the background once it is a minute old. */
  get now(): boolean {
    if (!this.checking && Date.now() - this.checkedAt >= RECHECK_MS) {
      this.checking = this.check().finally(() => (this.checking = undefined));
    }
    return this.sole;
  }

  private async check(): Promise<void> {
    try {
      const { rows } = await this.options.control.query<{ others: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM syncs o JOIN syncs me ON o.base_id = me.base_id AND o.id <> me.id
                         WHERE me.id = $1 AND o.state <> 'deleting') AS others`,
        [this.options.syncId],
      );
      this.sole = rows[0]?.others === false;
    } catch (error) {
      // Unknown: ordinary polls, as with company.
      this.sole = false;
      this.options.logger.debug({ err: toError(error) }, 'could not read whether another sync follows the base');
    }
    this.checkedAt = Date.now();
  }
}
