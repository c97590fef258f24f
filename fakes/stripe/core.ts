import type { AccountState } from './account.ts';
import type { KeyRegistry } from './auth.ts';
import type { Clock } from './clock.ts';
import type { FaultList } from '../shared/faults.ts';
import type { SlidingWindowLimiter } from '../shared/rate-limit.ts';
import type { Stats } from './stats.ts';
import type { FaultRule, RequestFacts } from './faults.ts';

/** Everything the HTTP side and the control API share. */
export interface Core {
  clock: Clock;
  accounts: Map<string, AccountState>;
  keys: KeyRegistry;
  faults: FaultList<FaultRule, RequestFacts>;
  stats: Stats;
  limiters: { test: SlidingWindowLimiter; live: SlidingWindowLimiter } | undefined;
  trustArrivalStamps: boolean;
}
