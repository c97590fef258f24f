import type { FaultList } from './faults.ts';
import type { IteratorStore } from './list-records.ts';
import type { BaseModel, World } from './model.ts';
import type { SlidingWindowLimiter } from '../shared/rate-limit.ts';
import { type Counts, CountsByKey, RefusalLog } from '../shared/stats.ts';
import type { WriteSession } from './record-ops.ts';
import type { TokenRegistry } from './tokens.ts';
import { type ChangeSource, Transaction } from './transaction.ts';
import type { WebhookStore } from './webhooks.ts';

/** Request counters, overall and per base. */
export class Stats {
  requests = 0;
  rateLimited = 0;
  private readonly perBase = new CountsByKey();
  readonly refusals = new RefusalLog();

  count(baseId: string | undefined, limited: boolean): void {
    if (limited) this.rateLimited++;
    if (baseId && limited) this.perBase.add(baseId, { rateLimited: 1 });
  }

  request(baseId: string | undefined): void {
    this.requests++;
    if (baseId) this.perBase.add(baseId, { requests: 1 });
  }

  byBase(baseId: string): Counts {
    return this.perBase.sum((key) => key === baseId);
  }

  reset(): void {
    this.requests = 0;
    this.rateLimited = 0;
    this.perBase.clear();
    this.refusals.clear();
  }
}

/** Everything the HTTP side and the control API share. */
export interface Core {
  world: World;
  webhooks: WebhookStore;
  iterators: IteratorStore;
  tokens: TokenRegistry;
  faults: FaultList;
  stats: Stats;
  limiters: { base: SlidingWindowLimiter; user: SlidingWindowLimiter } | undefined;
  trustArrivalStamps: boolean;
}

/**
 * Runs one write transaction: `fn` validates first and mutates after, so a thrown error leaves
 * the base as it was. Committed changes become one payload per matching live webhook.
 */
export function runWrite<T>(core: Core, base: BaseModel, source: ChangeSource, fn: (s: WriteSession) => T): T {
  const tx = new Transaction(core.world, base, source, core.webhooks.hasLive(base.id));
  const result = fn({ world: core.world, base, tx, userId: source.userId });
  core.webhooks.deliver(tx.commit());
  return result;
}
