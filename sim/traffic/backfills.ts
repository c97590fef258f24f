import { pause } from '../../src/time.ts';
import type { Random } from '../random.ts';
import { type ActorContext, OpCounts, type TrafficActor, type Violation } from '../types.ts';

/** The management API as the simulation calls it: the answer's JSON, or a throw with the status. */
export type ApiCall = (method: string, route: string, body?: unknown) => Promise<any>;

/**
 * A team asking for backfills on demand while the traffic runs: every 20 to 40 s, every
 * collection of one sync, read into its topics. The reads are folded with everything else:
 * the REST fold checks each read against the record as the events before it left it, and the
 * webhook and Kafka paths must carry them too. At the end each backfill must have finished.
 */
export class BackfillRequests implements TrafficActor {
  readonly name = 'backfills on demand';
  readonly counts = new OpCounts();
  doing: string | undefined;
  private readonly started: Array<{ syncId: string; id: string }> = [];

  constructor(private readonly options: ActorContext & { api: ApiCall; syncIds: string[] }) {}

  private get random(): Random {
    return this.options.random;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await pause(20_000 + this.random.int(20_000), signal);
      if (signal.aborted) return;
      const syncId = this.options.syncIds[this.random.int(this.options.syncIds.length)]!;
      this.doing = `starting a backfill of ${syncId}`;
      try {
        const made = await this.options.api('POST', `/api/syncs/${syncId}/backfills`, {});
        this.started.push({ syncId, id: made.id });
        this.counts.ok('backfill.start');
        this.options.log(`backfill ${made.id} of ${syncId}: ${made.collections.length} collections`);
      } catch (error) {
        // A fault may have the API down: that backfill is not asked for, nothing else.
        this.counts.no('backfill.start');
        this.options.log(`backfill of ${syncId} not started: ${(error as Error).message.slice(0, 120)}`);
      } finally {
        this.doing = undefined;
      }
    }
  }

  /** Once the syncs are quiet: every backfill asked for is done, none failed or stuck. */
  async finished(within: number): Promise<{ violations: Violation[]; rows: number }> {
    const violations: Violation[] = [];
    let rows = 0;
    const deadline = Date.now() + within;
    for (const { syncId, id } of this.started) {
      for (;;) {
        const view = await this.options.api('GET', `/api/syncs/${syncId}/backfills/${id}`);
        if (view.state === 'done') {
          rows += view.rows;
          break;
        }
        if (view.state !== 'running' || Date.now() > deadline) {
          violations.push({
            check: 'backfills',
            detail: `backfill ${id} of ${syncId} is ${view.state} after the traffic${view.error ? `: ${view.error}` : ''}`,
          });
          break;
        }
        await pause(1000);
      }
    }
    return { violations, rows };
  }
}
