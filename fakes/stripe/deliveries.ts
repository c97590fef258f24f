/**
 * Webhook deliveries: every event an account emits is POSTed to its enabled endpoints whose
 * `enabled_events` match, and a connected account's events also to its platform's `connect`
 * endpoints (with `account` naming it, as in the event itself). Each POST is signed the way
 * Stripe signs: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the
 * endpoint's whsec_ secret. A non-2xx answer or a network error is retried after 1, 2 and
 * 4 seconds (Stripe retries for three days; the fake shortens that), then given up. The
 * control API can pause deliveries, drop the next ones, or sign with a second secret too.
 */
import { createHmac } from 'node:crypto';
import type { AccountState } from './account.ts';
import type { StripeEvent } from './events.ts';
import type { StripeObject } from './store.ts';

/** Where endpoints live in each account, and the hidden facts each keeps (its secret). */
export const ENDPOINTS = 'webhook_endpoints';
const RETRY_DELAYS_MS = [1000, 2000, 4000];
const TIMEOUT_MS = 10_000;

export interface DeliveryStats {
  /** POSTs answered 2xx. */
  delivered: number;
  /** POSTs that failed (non-2xx or no answer), retried or not. */
  failed: number;
  /** Deliveries given up after the last retry, or dropped on purpose. */
  abandoned: number;
}

interface Delivery {
  url: string;
  secrets: string[];
  body: string;
  attempt: number;
}

/** The `Stripe-Signature` header for a body: one v1 entry for each secret. */
export function stripeSignature(body: string, secrets: string[], timestamp: number): string {
  const v1 = secrets.map((s) => `v1=${createHmac('sha256', s).update(`${timestamp}.${body}`).digest('hex')}`);
  return [`t=${timestamp}`, ...v1].join(',');
}

/** `*` matches everything; otherwise a type is listed exactly. */
function subscribed(endpoint: StripeObject, type: string): boolean {
  const events = endpoint.enabled_events as string[];
  return events.includes('*') || events.includes(type);
}

export class Deliveries {
  private paused = false;
  private held: Delivery[] = [];
  private dropping = 0;
  private closed = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<AbortController>();
  readonly stats: DeliveryStats = { delivered: 0, failed: 0, abandoned: 0 };

  /** Called as an event is stored: the endpoints it goes to, each sent one POST (and retries). */
  emitted(account: AccountState, event: StripeEvent): void {
    const targets: Array<{ obj: StripeObject; owner: AccountState }> = [];
    const pick = (owner: AccountState, connect: boolean) => {
      if (!owner.hasCollection(ENDPOINTS)) return;
      for (const { obj, deleted } of owner.collection(ENDPOINTS).ordered()) {
        const takesConnect = owner.hidden.get(obj.id)?.connect === true;
        if (!deleted && obj.status === 'enabled' && takesConnect === connect && subscribed(obj, event.type)) targets.push({ obj, owner });
      }
    };
    pick(account, false);
    if (account.platform) pick(account.platform, true);
    event.pending_webhooks = targets.length;
    if (targets.length === 0) return;
    const body = JSON.stringify(event, null, 2);
    for (const { obj: endpoint, owner } of targets) {
      const secrets = (owner.hidden.get(endpoint.id)?.secrets as string[] | undefined) ?? [];
      this.queue({ url: endpoint.url as string, secrets: [...secrets], body, attempt: 0 });
    }
  }

  /** Holds deliveries until resume(); they then go out in the order they were made. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    const held = this.held;
    this.held = [];
    for (const d of held) this.queue(d);
  }

  /** The deliveries held while paused are lost, as if the receiver never got them and Stripe gave up. */
  discardHeld(): void {
    this.stats.abandoned += this.held.length;
    this.held = [];
  }

  /** The next `n` deliveries are lost, as if the receiver never got them and Stripe gave up. */
  drop(n: number): void {
    this.dropping += n;
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    for (const c of this.inFlight) c.abort();
    this.timers.clear();
    this.held = [];
  }

  private queue(delivery: Delivery): void {
    if (this.closed) return;
    if (this.paused) {
      this.held.push(delivery);
      return;
    }
    if (delivery.attempt === 0 && this.dropping > 0) {
      this.dropping--;
      this.stats.abandoned++;
      return;
    }
    this.later(0, () => void this.send(delivery));
  }

  private later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    this.timers.add(timer);
  }

  private async send(delivery: Delivery): Promise<void> {
    const signature = stripeSignature(delivery.body, delivery.secrets, Math.floor(Date.now() / 1000));
    const abort = new AbortController();
    this.inFlight.add(abort);
    const timeout = setTimeout(() => abort.abort(), TIMEOUT_MS);
    let ok = false;
    try {
      const res = await fetch(delivery.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json; charset=utf-8',
          'stripe-signature': signature,
          'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
        },
        body: delivery.body,
        signal: abort.signal,
      });
      await res.arrayBuffer().catch(() => undefined);
      ok = res.ok;
    } catch {
      ok = false;
    } finally {
      clearTimeout(timeout);
      this.inFlight.delete(abort);
    }
    if (this.closed) return;
    if (ok) {
      this.stats.delivered++;
      return;
    }
    this.stats.failed++;
    const wait = RETRY_DELAYS_MS[delivery.attempt];
    if (wait === undefined) {
      this.stats.abandoned++;
      return;
    }
    this.later(wait, () => this.queue({ ...delivery, attempt: delivery.attempt + 1 }));
  }
}
