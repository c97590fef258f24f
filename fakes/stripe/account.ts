import type { Deliveries } from './deliveries.ts';
import { IdempotencyStore } from './idempotency.ts';
import type { LateEvents } from './late-events.ts';
import { accountTag } from './ids.ts';
import { Collection, type StripeObject } from './store.ts';

/** Everything one Stripe account holds. Accounts are one mode each (test or live). */
export class AccountState {
  readonly tag: string;
  private seq = 0;
  private readonly collections = new Map<string, Collection>();
  readonly idempotency = new IdempotencyStore();
  /** Line items by owner (invoice or checkout session) id, in /lines order; owners embed the first page. */
  readonly lineItems = new Map<string, Array<{ id: string; [key: string]: unknown }>>();
  /** Per-object facts Stripe keeps but does not show in the object (a plan's trial days, a price's tiers). */
  readonly hidden = new Map<string, Record<string, unknown>>();
  /** How many times generate() ran here: part of generated ids, so a second run never collides. */
  generations = 0;
  /** Connect: the platform this account is connected to, if it is a connected account. */
  platform?: AccountState;
  /** Connect: the accounts connected to this platform, by id (a deleted one is gone from here). */
  readonly connected = new Map<string, AccountState>();
  /** Connect: a connected account as `GET /v1/account(s)` shows it. */
  profile?: StripeObject;
  /** Sends each emitted event to the webhook endpoints it matches (the server's one sender). */
  deliveries?: Deliveries;
  /** Which events the list shows only after a delay (eventual consistency); the server's one setting. */
  late?: LateEvents;

  constructor(
    readonly id: string,
    readonly livemode: boolean,
    /** The account's default API version: events are rendered in it, requests without Stripe-Version use it. */
    readonly apiVersion: string,
  ) {
    this.tag = accountTag(id);
  }

  readonly nextSeq = (): number => ++this.seq;

  collection(name: string): Collection {
    let c = this.collections.get(name);
    if (!c) this.collections.set(name, (c = new Collection(this.nextSeq)));
    return c;
  }

  hasCollection(name: string): boolean {
    return this.collections.has(name);
  }
}
