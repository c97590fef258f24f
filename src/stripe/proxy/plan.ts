import { headerOf } from '../../proxy/headers.ts';
import type { Plan, PlanRequest, ProxyKindContext } from '../../proxy/plan.ts';
import { upstreamPathOf } from '../../proxy/routing.ts';
import { stripeQuotaKey, stripeRule } from '../client.ts';
import { StripeAccounts, stripeKeyOf } from './accounts.ts';
import { isStripeWrite, writeThroughStripe } from './write.ts';

/**
 * Stripe: the account the key belongs to is the quota key (as the sync's), found once per
 * key; a key whose account cannot be known counts under its own digest. The body streams
 * through; a write's answer is read whole.
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
    const accountId = key !== undefined && (ctx.limiter || write) ? await accounts.accountOf(key) : undefined;
    const quota = key !== undefined ? { key: stripeQuotaKey(accountId ?? null, key), rule: stripeRule(key) } : undefined;
    const plan: Plan = { path: upstreamPathOf(route), quota };
    if (write && quota) {
      const writeContext = { targets: ctx.targets, limiter: ctx.limiter, baseUrl: ctx.baseUrl, maxWaitMs: ctx.maxWaitMs, logger: ctx.logger };
      plan.writeThrough = (answer, meta) =>
        writeThroughStripe(
          writeContext,
          { key, accountId, onBehalfOf, quotaKey: quota.key, rule: quota.rule, apiVersion: meta.apiVersion, receivedAt: meta.receivedAt, date: meta.date },
          answer,
        );
    }
    return plan;
  };
}
