/**
 * An account's objects, per collection, in the JSON shape Stripe answers with (references as
 * ids). Stored objects are never mutated: a change stores a new object, so events and replayed
 * idempotent answers can keep references to old versions.
 */
export type StripeObject = { id: string; object: string; [key: string]: unknown };

export interface Entry {
  obj: StripeObject;
  /** Unix seconds: `created`, or `date` for objects that have no `created` (invoice items). */
  created: number;
  /** Creation order within the account: the tiebreak between objects created the same second. */
  seq: number;
  deleted: boolean;
}

/** Newest first means descending (created, seq); entries are kept ascending. */
export function compareEntries(a: Entry, b: Entry): number {
  return a.created - b.created || a.seq - b.seq;
}

export class Collection {
  private readonly byId = new Map<string, Entry>();
  private order: Entry[] = [];
  private sorted = true;
  private live = 0;

  constructor(private readonly nextSeq: () => number) {}

  get size(): number {
    return this.live;
  }

  insert(obj: StripeObject): Entry {
    if (this.byId.has(obj.id)) throw new Error(`${obj.object} ${obj.id} exists`);
    const created = typeof obj.created === 'number' ? obj.created : obj.date;
    if (typeof created !== 'number') throw new Error(`${obj.object} ${obj.id} has no creation time`);
    const entry: Entry = { obj, created, seq: this.nextSeq(), deleted: false };
    this.byId.set(obj.id, entry);
    const last = this.order[this.order.length - 1];
    if (last && compareEntries(last, entry) > 0) this.sorted = false;
    this.order.push(entry);
    this.live++;
    return entry;
  }

  /** The live object, or undefined (deleted objects too). */
  get(id: string): StripeObject | undefined {
    const e = this.byId.get(id);
    return e && !e.deleted ? e.obj : undefined;
  }

  /** Live or deleted: list cursors may name an object deleted since the last page. */
  entry(id: string): Entry | undefined {
    return this.byId.get(id);
  }

  replace(obj: StripeObject): void {
    const e = this.byId.get(obj.id);
    if (!e || e.deleted) throw new Error(`${obj.object} ${obj.id} is not stored`);
    if (obj.created !== e.obj.created) throw new Error('created never changes');
    if (obj.date !== e.obj.date && obj.created === undefined) throw new Error('an invoice item keeps its date');
    e.obj = obj;
  }

  /** Marks deleted; the entry stays as a tombstone so cursors keep their place. */
  remove(id: string): void {
    const e = this.byId.get(id);
    if (!e || e.deleted) return;
    e.deleted = true;
    this.live--;
  }

  /** All entries, tombstones included, ascending by (created, seq). */
  ordered(): Entry[] {
    if (!this.sorted) {
      this.order.sort(compareEntries);
      this.sorted = true;
    }
    return this.order;
  }

  /** Live entries in no particular order (cheaper than ordered() when sorting is not needed). */
  *liveEntries(): IterableIterator<Entry> {
    for (const e of this.byId.values()) if (!e.deleted) yield e;
  }

  *values(): IterableIterator<StripeObject> {
    for (const e of this.byId.values()) if (!e.deleted) yield e.obj;
  }
}

/** Object id prefixes, for expanding references. */
export const PREFIX_COLLECTIONS: Record<string, string> = {
  cus: 'customers',
  prod: 'products',
  price: 'prices',
  sub: 'subscriptions',
  si: 'subscription_items',
  in: 'invoices',
  ii: 'invoiceitems',
  inpay: 'invoice_payments',
  pi: 'payment_intents',
  ch: 'charges',
  py: 'charges',
  re: 'refunds',
  pyr: 'refunds',
  pm: 'payment_methods',
  cs: 'checkout_sessions',
  txn: 'balance_transactions',
  po: 'payouts',
  dp: 'disputes',
  du: 'disputes',
  evt: 'events',
  clock: 'test_clocks',
};

export function collectionOfId(id: string): string | undefined {
  const m = /^([a-z]+)_/.exec(id);
  return m ? PREFIX_COLLECTIONS[m[1] as string] : undefined;
}
