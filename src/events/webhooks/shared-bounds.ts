import { KeyedRateLimits, type RateLimit } from './rate-limit.ts';

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

/** The shared limits of one process's webhook workers, kept while some worker uses them. */
export class SharedRates {
  private readonly hosts: KeyedRateLimits;
  private readonly accounts: KeyedRateLimits;

  constructor(bounds: DeliveryBounds = DEFAULT_DELIVERY_BOUNDS) {
    this.hosts = new KeyedRateLimits(bounds.perHost);
    this.accounts = new KeyedRateLimits(bounds.perAccount);
  }

  /** The limits a webhook's attempts wait for, beside its own; `release` once its worker stops. */
  acquire(url: URL, accountId: string): { limits: RateLimit[]; release(): void } {
    const host = this.hosts.acquire(url.hostname.toLowerCase());
    const account = this.accounts.acquire(accountId);
    return {
      limits: [host.limit, account.limit],
      release: () => {
        host.release();
        account.release();
      },
    };
  }
}
