/**
 * API keys: secret (`sk_test_…`, `sk_live_…`) and restricted (`rk_…`) keys, each bound to one
 * account. Restricted keys carry Stripe's per-resource permissions, named like
 * `rak_customer_read`; write implies read.
 */
import type { IncomingHttpHeaders } from 'node:http';

export interface KeyGrant {
  account: string;
  /**
   * Only for rk_ keys: permission groups ('customer', 'rak_customer_read'), resources
   * ('customers') or whole Dashboard sections ('core', 'billing', 'checkout', 'issuing'…).
   */
  restricted?: { read?: string[]; write?: string[] };
}

export interface KeyEntry {
  key: string;
  accountId: string;
  livemode: boolean;
  restricted?: { read: Set<string>; write: Set<string> };
}

const KEY_SHAPE = /^(sk|rk)_(test|live)_[0-9A-Za-z]{4,247}$/;

/** 'customers', 'rak_customer_read', 'Checkout.Sessions' → 'customer', 'checkout_session'. */
export function permissionGroup(name: string): string {
  let g = name
    .trim()
    .toLowerCase()
    .replace(/^rak_/, '')
    .replace(/_(read|write)$/, '')
    .replace(/[./]/g, '_');
  if (g.endsWith('ies')) g = `${g.slice(0, -3)}y`;
  else if (g.endsWith('s') && !g.endsWith('ss')) g = g.slice(0, -1);
  return g;
}

export function permissionName(group: string, write: boolean): string {
  return `rak_${group}_${write ? 'write' : 'read'}`;
}

export class KeyRegistry {
  private readonly keys = new Map<string, KeyEntry>();

  add(key: string, grant: KeyGrant, account: { id: string; livemode: boolean }): KeyEntry {
    const m = KEY_SHAPE.exec(key);
    if (!m) throw new Error(`${key} does not look like a Stripe key (sk_test_…, sk_live_…, rk_test_…, rk_live_…)`);
    const livemode = m[2] === 'live';
    if (livemode !== account.livemode) throw new Error(`a ${m[2]} key cannot act on ${account.livemode ? 'live' : 'test'}-mode account ${account.id}`);
    const restrictedKey = m[1] === 'rk';
    if (restrictedKey !== (grant.restricted !== undefined)) {
      throw new Error(restrictedKey ? 'an rk_ key needs restricted permissions' : 'only rk_ keys take restricted permissions');
    }
    const entry: KeyEntry = { key, accountId: account.id, livemode };
    if (grant.restricted) {
      const write = new Set((grant.restricted.write ?? []).map(permissionGroup));
      const read = new Set([...(grant.restricted.read ?? []).map(permissionGroup), ...write]);
      entry.restricted = { read, write };
    }
    this.keys.set(key, entry);
    return entry;
  }

  revoke(key: string): void {
    this.keys.delete(key);
  }

  get(key: string): KeyEntry | undefined {
    return this.keys.get(key);
  }
}

/**
 * The Dashboard's sections of restricted-key permissions, so a grant may name a whole section
 * ('core', 'billing', 'checkout', 'connect') instead of each resource. Namespaced resources
 * (issuing_card, terminal_reader, treasury_…) belong to the section their prefix names.
 */
export const SECTIONS: Record<string, string[]> = {
  core: [
    'balance',
    'balance_transaction',
    'charge',
    'refund',
    'customer',
    'customer_balance_transaction',
    'cash_balance',
    'dispute',
    'event',
    'file',
    'file_link',
    'mandate',
    'payment_intent',
    'payment_method',
    'payment_method_configuration',
    'payment_method_domain',
    'payout',
    'product',
    'product_feature',
    'setup_intent',
    'setup_attempt',
    'source',
    'token',
    'apple_pay_domain',
    'country_spec',
    'exchange_rate',
    'confirmation_token',
    'customer_session',
    'payment_record',
    'payment_attempt_record',
    'review',
  ],
  billing: [
    'invoice',
    'invoiceitem',
    'invoice_payment',
    'invoice_rendering_template',
    'price',
    'plan',
    'coupon',
    'promotion_code',
    'quote',
    'subscription',
    'subscription_item',
    'subscription_schedule',
    'credit_note',
    'tax_rate',
    'tax_id',
    'tax_code',
    'shipping_rate',
    'test_helpers_test_clock',
    'discount',
  ],
  checkout: ['checkout_session', 'payment_link', 'item'],
  connect: ['account', 'application_fee', 'fee_refund', 'transfer', 'transfer_reversal', 'topup', 'capability', 'person', 'external_account', 'login_link'],
  webhook: ['webhook_endpoint'],
};

const SECTION_OF = new Map<string, string>(Object.entries(SECTIONS).flatMap(([section, groups]) => groups.map((g) => [g, section] as [string, string])));

export function sectionOf(group: string): string {
  return SECTION_OF.get(group) ?? (group.split('_')[0] as string);
}

/** True when the key may do this; secret keys may do everything. */
export function allowed(entry: KeyEntry, group: string, write: boolean): boolean {
  if (!entry.restricted) return true;
  const granted = write ? entry.restricted.write : entry.restricted.read;
  return granted.has(group) || granted.has(sectionOf(group));
}

/** The key a request presents: `Authorization: Bearer <key>` or HTTP basic with the key as user name. */
export function presentedKey(headers: IncomingHttpHeaders): string | undefined {
  const header = headers.authorization;
  if (!header) return undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header);
  if (!basic) return '';
  const decoded = Buffer.from(basic[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? decoded : decoded.slice(0, colon);
}
