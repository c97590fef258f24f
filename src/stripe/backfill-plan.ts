import { type CatalogList, loadCatalog } from './catalog.ts';
import { readByAccount } from './scope.ts';
import { tableOfList } from './store.ts';

/** What a backfill reads, how, and in what order. */

/** Lists that only repeat what another list already gives, at one request per parent. */
const REDUNDANT = new Set(['/v1/customers/{customer}/subscriptions', '/v1/charges/{charge}/refunds']);

/**
 * Lists a parent can carry inline when asked (`expand`): each customer's sources and tax ids
 * come with the customer page instead of costing one request per customer. The expanded
 * fields are not kept in the parent's row, since events never carry them.
 */
export const EXPAND: Record<string, string[]> = {
  '/v1/customers': ['sources', 'tax_ids', 'cash_balance'],
  '/v1/payment_intents': ['amount_details.line_items'],
  '/v1/checkout/sessions': ['line_items'],
};

/**
 * An expanded field that, when empty, proves a per-parent list empty too: a customer without
 * a cash balance has no cash balance transactions, so that list costs no request for it.
 */
export const EMPTY_WHEN_NULL: Record<string, { field: string; list: string }> = {
  '/v1/customers': { field: 'cash_balance', list: '/v1/customers/{customer}/cash_balance_transactions#customer' },
};

/**
 * Per-parent lists needed only for some parents (`where`, over the parent `p`), and the tables
 * that condition reads, which must be complete before it is asked: schedules of test-clock
 * customers are the ones the top-level list leaves out.
 */
export const PARENT_FILTER: Record<string, { where: string; reads: string[] }> = {
  '/v1/subscription_schedules': { where: 'p.test_clock IS NOT NULL', reads: [] },
  // A customer's active entitlements are features of the products of their live subscriptions:
  // none without a live subscription, and none at all in an account that has no feature (as
  // far as the key could tell: a key refused the features list proves nothing). $3 is the
  // account, $4 its list state prefix.
  '/v1/entitlements/active_entitlements': {
    where: `(EXISTS (SELECT 1 FROM public.entitlements_feature f WHERE f.stripe_account IS NOT DISTINCT FROM $3)
          OR EXISTS (SELECT 1 FROM public_swap._state WHERE key = $4 || '/v1/entitlements/features' AND value ? 'skipped'))
        AND EXISTS (SELECT 1 FROM public.subscription s WHERE s.customer = p.id AND s.status NOT IN ('canceled', 'incomplete_expired'))`,
    reads: ['subscription', 'entitlements_feature'],
  },
};

/**
 * The tables a new user queries first. Their lists, and the lists of their parents, are served
 * before the others; the lists read once per parent come last, since each holds few objects.
 */
const FIRST_TABLES = new Set(['customer', 'product', 'price', 'subscription', 'invoice']);

/** Parents whose list one per-parent list reads at once (the request slots bound them all together). */
export const PARENTS_AT_ONCE = 12;

/** How often a per-parent list saves its place while it reads (and always at the end of a batch). */
export const PLACE_SAVED_EVERY_MS = 1000;

/** The order the lists' requests are served in: 0 first. */
export function priorities(lists: CatalogList[]): Map<CatalogList, number> {
  const first = new Set(FIRST_TABLES);
  for (const l of lists) if (l.parent && FIRST_TABLES.has(tableOfList(l)!)) first.add(l.parent.table);
  return new Map(lists.map((l) => [l, first.has(tableOfList(l)!) ? 0 : l.parent ? 2 : 1]));
}

/** The lists a backfill of the account reads. */
export function backfillLists(account: string | null): CatalogList[] {
  return loadCatalog()
    .tables.flatMap((t) => t.lists)
    .filter((l) => !REDUNDANT.has(l.path) && readByAccount(l.path, account));
}
