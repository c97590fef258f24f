/**
 * What each modeled resource is called (collection, object, id prefix, message noun,
 * permission group, event prefix), in one place so resources can refer to each other without
 * importing each other's code.
 */
import type { ResourceNames } from '../context.ts';

const names = (name: string, object: string, prefix: string, noun: string, group: string, events: string | null): ResourceNames => ({
  name,
  object,
  prefix,
  noun,
  group,
  events,
});

export const CUSTOMERS = names('customers', 'customer', 'cus', 'customer', 'customer', 'customer');
export const PRODUCTS = names('products', 'product', 'prod', 'product', 'product', 'product');
export const PRICES = names('prices', 'price', 'price', 'price', 'price', 'price');
export const PLANS = names('plans', 'plan', 'price', 'plan', 'plan', 'plan');
export const COUPONS = names('coupons', 'coupon', '', 'coupon', 'coupon', 'coupon');
export const SUBSCRIPTIONS = names('subscriptions', 'subscription', 'sub', 'subscription', 'subscription', 'customer.subscription');
export const SUBSCRIPTION_ITEMS = names('subscription_items', 'subscription_item', 'si', 'subscription_item', 'subscription', null);
export const INVOICES = names('invoices', 'invoice', 'in', 'invoice', 'invoice', 'invoice');
export const INVOICE_ITEMS = names('invoiceitems', 'invoiceitem', 'ii', 'invoiceitem', 'invoice', 'invoiceitem');
export const INVOICE_PAYMENTS = names('invoice_payments', 'invoice_payment', 'inpay', 'invoice_payment', 'invoice', null);
export const PAYMENT_INTENTS = names('payment_intents', 'payment_intent', 'pi', 'payment_intent', 'payment_intent', 'payment_intent');
export const CHARGES = names('charges', 'charge', 'ch', 'charge', 'charge', 'charge');
export const REFUNDS = names('refunds', 'refund', 're', 'refund', 'charge', 'refund');
export const PAYMENT_METHODS = names('payment_methods', 'payment_method', 'pm', 'PaymentMethod', 'payment_method', null);
export const CHECKOUT_SESSIONS = names('checkout_sessions', 'checkout.session', 'cs_test', 'checkout.session', 'checkout_session', null);
export const BALANCE_TRANSACTIONS = names('balance_transactions', 'balance_transaction', 'txn', 'balance transaction', 'balance', null);
export const PAYOUTS = names('payouts', 'payout', 'po', 'payout', 'payout', 'payout');
export const DISPUTES = names('disputes', 'dispute', 'du', 'dispute', 'dispute', 'charge.dispute');
/** Connected accounts, kept in their platform (resources/accounts.ts); `account.*` events go on the platform's feed. */
export const ACCOUNTS = names('accounts', 'account', 'acct', 'account', 'connect', 'account');
export const EVENTS = names('events', 'event', 'evt', 'event', 'event', null);
export const TEST_CLOCKS = names('test_clocks', 'test_helpers.test_clock', 'clock', 'test_clock', 'test_helpers_test_clock', 'test_helpers.test_clock');
export const ENTITLEMENT_FEATURES = names('entitlements/features', 'entitlements.feature', 'feat', 'feature', 'entitlements_feature', null);
/** Webhook endpoints (resources/webhook-endpoints.ts); no events of their own. */
export const WEBHOOK_ENDPOINTS = names('webhook_endpoints', 'webhook_endpoint', 'we', 'webhook_endpoint', 'webhook_endpoint', null);
