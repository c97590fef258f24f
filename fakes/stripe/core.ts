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

/** An account by id: a platform's own, or one connected to a platform (whose owner may hold keys of it too). */
export function accountById(core: Core, id: string): AccountState | undefined {
  const own = core.accounts.get(id);
  if (own) return own;
  for (const platform of core.accounts.values()) {
    const connected = platform.connected.get(id);
    if (connected) return connected;
  }
  return undefined;
}
