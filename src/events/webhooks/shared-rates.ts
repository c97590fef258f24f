import { RateLimit } from './rate-limit.ts';

/**
 * Attempts per second in one process across every webhook: to one destination host (of
 * every account), and of one account (to every host). Without them, webhooks made to point at
 * a third party (an account may have 100) and a recovery of each made the service a reflector:
 * 80,754 POSTs in ~11 s. A webhook's own `max_per_second` applies within these.
 */
export interface DeliveryBounds {
  perHost: number;
  perAccount: number;
}

export const DEFAULT_DELIVERY_BOUNDS: DeliveryBounds = { perHost: 1_000, perAccount: 2_000 };

interface Shared {
  limit: RateLimit;
  users: number;
}

/** The shared limits of one process's webhook workers, kept while some worker uses them. */
export class SharedRates {
  private readonly hosts = new Map<string, Shared>();
  private readonly accounts = new Map<string, Shared>();

  constructor(private readonly bounds: DeliveryBounds = DEFAULT_DELIVERY_BOUNDS) {}

  /** The limits a webhook's attempts wait for, beside its own; `release` once its worker stops. */
  acquire(url: URL, accountId: string): { limits: RateLimit[]; release(): void } {
    const host = this.take(this.hosts, url.hostname.toLowerCase(), this.bounds.perHost);
    const account = this.take(this.accounts, accountId, this.bounds.perAccount);
    let released = false;
    return {
      limits: [host.shared.limit, account.shared.limit],
      release: () => {
        if (released) return;
        released = true;
        host.release();
        account.release();
      },
    };
  }

  private take(map: Map<string, Shared>, key: string, perSecond: number): { shared: Shared; release(): void } {
    let shared = map.get(key);
    if (!shared) map.set(key, (shared = { limit: new RateLimit(perSecond), users: 0 }));
    shared.users += 1;
    const held = shared;
    return {
      shared: held,
      release: () => {
        held.users -= 1;
        if (held.users === 0 && map.get(key) === held) map.delete(key);
      },
    };
  }
}
