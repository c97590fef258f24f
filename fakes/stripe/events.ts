/**
 * Events: what every change through the API or the control API leaves behind, as
 * `GET /v1/events` shows it. Stripe keeps them 30 days.
 */
import type { StripeObject } from './store.ts';

export const EVENT_RETENTION_SECONDS = 30 * 86_400;

export interface RequestInfo {
  id: string | null;
  idempotency_key: string | null;
}

export interface StripeEvent extends StripeObject {
  object: 'event';
  api_version: string;
  data: { object: StripeObject; previous_attributes?: Record<string, unknown> };
  livemode: boolean;
  pending_webhooks: number;
  request: RequestInfo;
  type: string;
}

const isHash = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v) && !('object' in v);

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * `previous_attributes`: the old values of what changed. Plain hashes (metadata, address…) are
 * compared key by key, keys that did not exist before showing as null; arrays and embedded
 * objects (lists, prices) are given whole, as Stripe documents.
 */
export function previousAttributes(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, unknown> | undefined {
  let out: Record<string, unknown> | undefined;
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const k of keys) {
    const a = before[k];
    const b = after[k];
    if (same(a, b)) continue;
    out ??= {};
    out[k] = isHash(a) && isHash(b) ? (previousAttributes(a, b) ?? {}) : (a ?? null);
  }
  return out;
}

export function buildEvent(
  id: string,
  type: string,
  object: StripeObject,
  opts: { created: number; apiVersion: string; livemode: boolean; request: RequestInfo; previous?: Record<string, unknown>; account?: string },
): StripeEvent {
  // A deep copy: the event shows the object as it was, whatever happens to it later.
  const snapshot = structuredClone(object);
  return {
    id,
    object: 'event',
    // A connected account's events name it (Connect).
    ...(opts.account ? { account: opts.account } : {}),
    api_version: opts.apiVersion,
    created: opts.created,
    data: opts.previous ? { object: snapshot, previous_attributes: structuredClone(opts.previous) } : { object: snapshot },
    livemode: opts.livemode,
    pending_webhooks: 0,
    request: { ...opts.request },
    type,
  };
}
