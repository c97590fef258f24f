import { Secret } from '../control/secrets.ts';
import type { CreateSyncInput } from '../control/sync-service.ts';
import { TributaryError } from '../errors.ts';
import type { QuotaLimiter } from '../quota/limiter.ts';
import { UpstreamUnreachable } from '../upstream/http.ts';
import { loadCatalog } from './catalog.ts';
import { StripeClient, StripeError, type StripeObject, stripeQuotaKey, stripeRule } from './client.ts';

/** The seed's permission groups a restricted key should read; one list of each is probed. */
const GROUPS = ['core', 'checkout', 'billing', 'connect', 'issuing', 'reporting'];

function probes(): Array<{ group: string; path: string; tables: string[] }> {
  const tables = loadCatalog().tables;
  return GROUPS.flatMap((group) => {
    const lists = tables.flatMap((t) => t.lists.filter((l) => !l.parent && l.group === group).map((l) => ({ table: t.table, path: l.path })));
    if (lists.length === 0) return [];
    return [{ group, path: lists[0]!.path, tables: [...new Set(lists.map((l) => l.table))] }];
  });
}

function nameOf(account: StripeObject): string | undefined {
  const settings = account.settings as { dashboard?: { display_name?: string } } | undefined;
  const profile = account.business_profile as { name?: string } | undefined;
  return settings?.dashboard?.display_name || profile?.name || (typeof account.email === 'string' ? account.email : undefined) || undefined;
}

/**
 * Before a Stripe sync is created: the key must be accepted. A restricted key may lack some
 * read permissions; the sync still runs, skips those objects and says which (warnings).
 */
export function stripeCheck(options: { baseUrl: string; limiter?: QuotaLimiter }) {
  return async (input: CreateSyncInput): Promise<{ upstreamAccountId?: string; upstreamName?: string; warnings: string[] }> => {
    const client = (quotaKey: string) =>
      new StripeClient({
        baseUrl: options.baseUrl,
        key: new Secret(input.apiKey),
        limiter: options.limiter,
        quotaKey,
        quota: { kind: 'client', maxWaitMs: 10_000 },
        // A few tries: the first request is counted under the key, the rest under the account.
        attempts: 4,
        timeoutMs: 15_000,
      });
    try {
      let account: StripeObject | undefined;
      try {
        account = await client(stripeQuotaKey(null, input.apiKey)).request<StripeObject>('GET', '/v1/account');
      } catch (error) {
        // A restricted key may not read the account itself; its lists decide.
        if (!(error instanceof StripeError && (error.kind === 'permission' || error.kind === 'missing'))) throw error;
      }
      const accountId = typeof account?.id === 'string' ? account.id : undefined;
      // The account request was counted under the key, before the account was known: it is
      // counted again under the account's quota, so the sync starting next sees it there.
      if (accountId && options.limiter) {
        await options.limiter.acquire(stripeQuotaKey(accountId, input.apiKey), stripeRule(input.apiKey), { kind: 'client', maxWaitMs: 10_000 });
      }
      const reader = client(stripeQuotaKey(accountId, input.apiKey));
      const warnings: string[] = [];
      let readable = 0;
      for (const probe of probes()) {
        try {
          await reader.listPage(probe.path, { limit: 1 });
          readable++;
        } catch (error) {
          if (!(error instanceof StripeError && error.kind === 'permission')) throw error;
          warnings.push(`the key cannot read ${probe.group} resources (${error.message}); skipped: ${probe.tables.join(', ')}`);
        }
      }
      if (readable === 0) throw new TributaryError('unprocessable', `the Stripe key can read none of the objects to sync: ${warnings.join('; ')}`);
      return { ...(accountId ? { upstreamAccountId: accountId } : {}), upstreamName: account ? nameOf(account) : undefined, warnings };
    } catch (error) {
      if (error instanceof TributaryError) throw error;
      if (error instanceof StripeError && error.kind === 'auth') {
        throw new TributaryError('unprocessable', error.message);
      }
      if (error instanceof UpstreamUnreachable || (error instanceof StripeError && (error.kind === 'transient' || error.kind === 'rate_limited'))) {
        throw new TributaryError('unavailable', `Stripe could not be reached to check the key: ${error.message}`, { expose: true });
      }
      throw new TributaryError('unprocessable', `Stripe refused the check: ${(error as Error).message}`);
    }
  };
}
