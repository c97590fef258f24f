import { AUDIT_SHARE } from './audit.ts';
import { stripeRule } from './client.ts';

/**
 * The sync's share of the account's limit: most of it, leaving room for the customer's own
 * requests (straight to Stripe, which the quota never sees, and through the proxy, which it
 * serves first anyway); Turbo takes all of it.
 */
export function syncShare(key: string, turbo: boolean): number {
  const limit = stripeRule(key).limit;
  return turbo ? limit : Math.floor(limit * 0.8);
}

/** The audit's requests a second, within the sync's share (docs/stripe.md#the-audit). */
export function auditShare(key: string): number {
  return Math.max(1, Math.floor(stripeRule(key).limit * AUDIT_SHARE));
}
