/** `GET /v1/balance`: sums of the balance transactions, split by whether they have settled. */
import type { Call, Route } from '../routes.ts';
import { BALANCE_TRANSACTIONS } from './names.ts';

function balance({ ctx }: Call): unknown {
  const now = ctx.clock.now();
  const available = new Map<string, number>();
  const pending = new Map<string, number>();
  for (const t of ctx.col(BALANCE_TRANSACTIONS.name).values()) {
    const bucket = (t.available_on as number) <= now ? available : pending;
    bucket.set(t.currency as string, (bucket.get(t.currency as string) ?? 0) + (t.net as number));
  }
  const currencies = new Set(['usd', ...available.keys(), ...pending.keys()]);
  const amounts = (m: Map<string, number>) => [...currencies].map((c) => ({ amount: m.get(c) ?? 0, currency: c, source_types: { card: m.get(c) ?? 0 } }));
  return { object: 'balance', available: amounts(available), livemode: ctx.livemode, pending: amounts(pending) };
}

/** `GET /v1/account`: the account the key belongs to, as far as the fake knows it. */
function account({ ctx }: Call): unknown {
  // A connected account (Stripe-Account) as its platform made it.
  if (ctx.account.profile) return ctx.account.profile;
  const name = `Fake account ${ctx.account.id.slice(-6)}`;
  return {
    id: ctx.account.id,
    object: 'account',
    business_profile: { name, url: null, support_email: null },
    business_type: 'company',
    charges_enabled: true,
    country: 'US',
    created: ctx.clock.now() - 365 * 86_400,
    default_currency: 'usd',
    details_submitted: true,
    email: `owner@${ctx.account.id.toLowerCase()}.example.com`,
    metadata: {},
    payouts_enabled: true,
    settings: { dashboard: { display_name: name, timezone: 'Etc/UTC' } },
    type: 'standard',
  };
}

export const balanceRoutes: Route[] = [
  { method: 'GET', template: '/v1/balance', group: 'balance', handler: balance },
  { method: 'GET', template: '/v1/account', group: 'account', handler: account },
];
