import { headerOf } from '../../proxy/headers.ts';
import type { Plan, PlanQuota, PlanRequest, ProxyKindContext } from '../../proxy/plan.ts';
import { upstreamPathOf } from '../../proxy/routing.ts';
import { stripeQuotaKey, stripeRule } from '../client.ts';
import { StripeAccounts, stripeKeyOf } from './accounts.ts';
import { isStripeWrite, writeThroughStripe } from './write.ts';

/**
 * Stripe: the account the key belongs to is the quota key (as the sync's) once it is known;
 * until then the key counts under its own digest, which spends nobody else's quota. A key's
 * account is asked of Stripe only after the key had a 2xx answer (src/stripe/proxy/accounts.ts),
 * so an invalid key costs one upstream request, not two. The body streams through; a write's
 * answer is read whole.
 */
export function stripePlanner(ctx: ProxyKindContext) {
  const accounts = new StripeAccounts({ baseUrl: ctx.baseUrl, limiter: ctx.limiter, logger: ctx.logger, maxWaitMs: ctx.maxWaitMs, pool: ctx.pool });
  return async ({ req, route }: PlanRequest): Promise<Plan> => {
    const method = req.method ?? 'GET';
    const key = stripeKeyOf(headerOf(req, 'authorization'));
    const onBehalf = headerOf(req, 'stripe-account');
    const onBehalfOf = onBehalf && /^acct_[A-Za-z0-9]+$/.test(onBehalf) ? onBehalf : undefined;
    const write = key !== undefined && isStripeWrite(method, route.path);
    // Asked only when it matters: for the quota, or to find a write's sync.
    const admitted = key !== undefined && (ctx.limiter || write) ? await accounts.admit(key, ctx.maxWaitMs) : undefined;
    const accountId = admitted?.accountId;
    const quota: PlanQuota | undefined =
      key !== undefined
        ? { key: stripeQuotaKey(accountId ?? null, key), rule: stripeRule(key), label: accountId ? `Stripe account ${accountId}` : 'Stripe key', proven: true }
        : undefined;
    const plan: Plan = { path: upstreamPathOf(route), quota, ...(admitted?.settle ? { ended: admitted.settle } : {}) };
    if (write && quota) {
      const writeContext = { targets: ctx.targets, limiter: ctx.limiter, baseUrl: ctx.baseUrl, maxWaitMs: ctx.maxWaitMs, logger: ctx.logger };
      plan.writeThrough = async (answer, meta) => {
        // A key not seen before: Stripe accepted it, so now its account may be asked.
        const account = admitted?.known ? accountId : await accounts.accountOf(key);
        return writeThroughStripe(
          writeContext,
          {
            key,
            accountId: account,
            onBehalfOf,
            quotaKey: stripeQuotaKey(account ?? null, key),
            rule: quota.rule,
            apiVersion: meta.apiVersion,
            receivedAt: meta.receivedAt,
            date: meta.date,
          },
          answer,
        );
      };
    }
    return plan;
  };
}
