import type { Runner } from '../lease/worker.ts';
import type { TenantScope } from './scope.ts';

/**
 * A runner factory whose runners run as their sync's account (TenantScope.runAs): made and
 * started in the account's scope, so everything they set going shares its connections.
 */
export function asAccountWork(
  scope: TenantScope,
  accountOf: (syncId: string) => Promise<string | undefined>,
  make: (syncId: string) => Promise<Runner>,
): (syncId: string) => Promise<Runner> {
  return async (syncId) => {
    const accountId = await accountOf(syncId);
    if (accountId === undefined) return make(syncId);
    const runner = await scope.runAs(accountId, () => make(syncId));
    return {
      start: () => scope.runAs(accountId, () => runner.start()),
      stop: () => runner.stop(),
    };
  };
}
