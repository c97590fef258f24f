import { semaphore, type Limited } from '../../semaphore.ts';
import { FairRateLimit, type Pace } from './fair-rate-limit.ts';
import { Keyed } from './keyed.ts';
import { RateLimit } from './rate-limit.ts';

/**
 * What one process's webhook workers share across webhooks. Attempts per second: to one
 * destination host (of every account), and of one account (to every host). Without them,
 * webhooks made to point at a third party (an account may have 100) and a recovery of each
 * made the service a reflector: 80,754 POSTs in ~11 s. A webhook's own `max_per_second`
 * applies within these. And the events an account's webhooks hold in memory together: without
 * that bound, ten webhooks to receivers that answered after 9 s held 10,000 events each, and
 * the service's RSS went from 225 MB to 1.3 GB. And the attempts an account has in flight:
 * each holds a socket and its buffers, and an account's webhooks to slow receivers would
 * otherwise hold 128 each (100 webhooks: 12,800 sockets, past a process's file limit).
 *
 * A host's rate is handed to its accounts in turn (FairRateLimit), and each sync has its own
 * connections (its deliverer's sender): another account's backlog to the same receiver host
 * (tenants share hooks.zapier.com) is never queued ahead of an account's own attempt.
 */
export interface DeliveryBounds {
  perHost: number;
  perAccount: number;
  /** Events held in memory by an account's webhooks together, an equal part each. */
  heldPerAccount: number;
  /** Attempts of an account's webhooks in flight at once (sockets held). */
  inFlightPerAccount: number;
}

export const DEFAULT_DELIVERY_BOUNDS: DeliveryBounds = { perHost: 1_000, perAccount: 2_000, heldPerAccount: 20_000, inFlightPerAccount: 256 };

/** An account's webhook workers in this process, sharing its room in memory equally. */
class HeldShare {
  members = 0;

  constructor(private readonly total: number) {}

  /** A worker's part: the most events it may hold now (a newcomer shrinks the others' parts). */
  get part(): number {
    return Math.max(1, Math.floor(this.total / Math.max(1, this.members)));
  }
}

/** What each attempt of a webhook works within, beside the webhook's own rate. */
export interface AttemptBounds {
  /** Waited for in order: its host's rate (its account's turn of it), its account's. */
  paces: Pace[];
  /** Holds one of the account's slots for attempts in flight while the attempt is made. */
  inFlight: Limited;
}

/** What a webhook's worker takes of the shared bounds while it runs. */
export interface TakenBounds {
  attempts: AttemptBounds;
  /** The most events the worker may hold in memory now. */
  held(): number;
  release(): void;
}

/** The shared bounds of one process's webhook workers, kept while some worker uses them. */
export class SharedBounds {
  private readonly hosts: Keyed<FairRateLimit>;
  private readonly accounts: Keyed<RateLimit>;
  private readonly held: Keyed<HeldShare>;
  private readonly inFlight: Keyed<Limited>;

  constructor(given: Partial<DeliveryBounds> = {}) {
    const bounds = { ...DEFAULT_DELIVERY_BOUNDS, ...given };
    this.hosts = new Keyed(() => new FairRateLimit(bounds.perHost));
    this.accounts = new Keyed(() => new RateLimit(bounds.perAccount));
    this.held = new Keyed(() => new HeldShare(bounds.heldPerAccount));
    this.inFlight = new Keyed(() => semaphore(bounds.inFlightPerAccount));
  }

  /** What a webhook's worker works within; `release` once it stops. */
  acquire(url: URL, accountId: string): TakenBounds {
    const host = this.hosts.acquire(url.hostname.toLowerCase());
    const account = this.accounts.acquire(accountId);
    const held = this.held.acquire(accountId);
    const inFlight = this.inFlight.acquire(accountId);
    held.value.members += 1;
    let released = false;
    return {
      attempts: { paces: [host.value.for(accountId), account.value], inFlight: inFlight.value },
      held: () => held.value.part,
      release: () => {
        if (released) return;
        released = true;
        held.value.members -= 1;
        for (const taken of [host, account, held, inFlight]) taken.release();
      },
    };
  }
}
