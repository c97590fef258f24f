/**
 * One Stripe account's share of a sync: the key's own account (null), or a connected account
 * it reaches with `Stripe-Account`. Each keeps its own progress in `_state`, and a connected
 * account skips the lists that only the platform has or that are the same for every account.
 */

/** Where an account's progress is kept: the key's own under the original names, a connected account's with `@acct_…`. */
export function stateKeys(account: string | null): { backfill: string; events: string; lists: string } {
  const at = account ? `@${account}` : '';
  return { backfill: `stripe.backfill${at}`, events: `stripe.events${at}`, lists: `stripe.list${at}:` };
}

/** What every connected account's backfill key starts with: the accounts a sync keeps progress for. */
export const CONNECTED_BACKFILL_PREFIX = `${stateKeys(null).backfill}@`;

/**
 * Lists read on the platform only: its connected accounts and what hangs off them, its
 * application fees, and reference lists (tax codes, country specs, exchange rates, climate
 * products and suppliers, report types) that are the same for every account.
 */
const PLATFORM_ONLY = /^\/v1\/(accounts|application_fees|tax_codes|country_specs|exchange_rates|climate\/(products|suppliers)|reporting\/report_types)(\/|$)/;

export function readByAccount(path: string, account: string | null): boolean {
  return account === null || !PLATFORM_ONLY.test(path);
}
