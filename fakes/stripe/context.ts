/**
 * One operation on one account — an API request or a control-API call — and the helpers every
 * resource uses to store objects and leave the matching events behind.
 */
import type { AccountState } from './account.ts';
import type { Clock } from './clock.ts';
import { noSuch } from './errors.ts';
import { buildEvent, previousAttributes, type RequestInfo, type StripeEvent } from './events.ts';
import { randomId } from './ids.ts';
import type { Collection, StripeObject } from './store.ts';

/** What a resource is called: where it is stored, how its ids and messages and events look. */
export interface ResourceNames {
  /** Collection name, also the URL segment: 'customers', 'checkout/sessions'. */
  name: string;
  /** The `object` field: 'customer', 'checkout.session'. */
  object: string;
  prefix: string;
  /** "No such <noun>: 'id'". */
  noun: string;
  /** Restricted-key permission group. */
  group: string;
  /** Event type prefix ('customer.subscription'); null: no generic created/updated/deleted events. */
  events: string | null;
}

export class Ctx {
  constructor(
    readonly account: AccountState,
    readonly clock: Clock,
    readonly request: RequestInfo,
    /** The API version the request asked for (Stripe-Version), else the account's. */
    readonly apiVersion: string,
    private readonly emitEvents = true,
    /** Id maker; the generator swaps in a seeded one. */
    readonly newId: (prefix: string) => string = (prefix) => randomId(prefix, account.tag),
    /** Fixed creation time (the generator spreads objects over the past); default now. */
    private readonly at?: () => number,
    /** Events are dated by the real clock even though objects are not (test clocks, as Stripe does). */
    private readonly eventsAtRealTime = false,
  ) {}

  /**
   * The same operation on objects that live on a test clock: they are dated `time` (the clock's
   * frozen time, or a moment within an advance) while their events keep real time.
   */
  atTime(time: number): Ctx {
    return new Ctx(this.account, this.clock, this.request, this.apiVersion, this.emitEvents, this.newId, () => time, true);
  }

  /** Back to real time: what test-clock billing creates besides invoices (payment intents, charges) is dated now. */
  realTime(): Ctx {
    if (!this.eventsAtRealTime) return this;
    return new Ctx(this.account, this.clock, this.request, this.apiVersion, this.emitEvents, this.newId);
  }

  get now(): number {
    return this.at ? this.at() : this.clock.now();
  }

  get livemode(): boolean {
    return this.account.livemode;
  }

  col(name: string): Collection {
    return this.account.collection(name);
  }

  get(res: ResourceNames, id: string): StripeObject | undefined {
    return this.col(res.name).get(id);
  }

  /** The live object or Stripe's 404 resource_missing, naming `param`. */
  find(res: ResourceNames, id: string, param = 'id'): StripeObject {
    const obj = this.col(res.name).get(id);
    if (!obj) throw noSuch(res.noun, id, param);
    return obj;
  }

  emit(type: string, object: StripeObject, previous?: Record<string, unknown>): void {
    if (!this.emitEvents) return;
    const event: StripeEvent = buildEvent(this.newId('evt'), type, object, {
      created: this.eventsAtRealTime ? this.clock.now() : this.now,
      apiVersion: this.account.apiVersion,
      livemode: this.account.livemode,
      request: this.request,
      ...(previous ? { previous } : {}),
      ...(this.account.platform ? { account: this.account.id } : {}),
    });
    this.account.late?.onEvent(event.id, object.id);
    this.account.deliveries?.emitted(this.account, event);
    this.col('events').insert(event);
  }

  insert<T extends StripeObject>(res: ResourceNames, obj: T, eventType: string | null = res.events && `${res.events}.created`): T {
    this.col(res.name).insert(obj);
    if (eventType) this.emit(eventType, obj);
    return obj;
  }

  /**
   * Stores a new version; `eventType` (default `<events>.updated`) is emitted with the changed
   * attributes, and not at all when nothing changed. Returns the stored version.
   */
  save<T extends StripeObject>(res: ResourceNames, next: T, eventType: string | null = res.events && `${res.events}.updated`): T {
    const col = this.col(res.name);
    const before = col.get(next.id);
    if (!before) throw noSuch(res.noun, next.id);
    if (before === next) return next;
    const previous = previousAttributes(before, next);
    if (!previous) return before as T;
    col.replace(next);
    if (eventType) this.emit(eventType, next, previous);
    return next;
  }

  /** Deletes and emits `<events>.deleted` carrying the object as it was; answers Stripe's stub. */
  destroy(
    res: ResourceNames,
    obj: StripeObject,
    eventType: string | null = res.events && `${res.events}.deleted`,
  ): { id: string; object: string; deleted: true } {
    this.col(res.name).remove(obj.id);
    if (eventType) this.emit(eventType, obj);
    return { id: obj.id, object: obj.object, deleted: true };
  }
}
