/** What an attempt waits for before it is made: a rate, its own or one it shares. */
export interface Pace {
  /** Resolves when the attempt may be made, or at once when `signal` aborts. */
  take(signal: AbortSignal): Promise<void>;
}

interface Waiter {
  resolve: () => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/**
 * A rate shared by several parties (a destination host's, by the accounts delivering to it),
 * handed out in turn: each party with attempts waiting gets the next token in its round, so
 * one party's many waiting lanes do not queue ahead of another's one. A plain token bucket
 * let whoever came first take tokens ahead: one account's 1,280 lanes to a busy host put
 * every other account's attempt to that host 1.3 s behind them.
 */
export class FairRateLimit {
  private tokens: number;
  private at = Date.now();
  /** Waiting attempts by party; the Map's order is the round (a party served goes last). */
  private readonly waiting = new Map<string, Waiter[]>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly perSecond: number) {
    this.tokens = this.burst;
  }

  /** A tenth of a second's worth, at least one: attempts spread evenly, not in bursts. */
  private get burst(): number {
    return Math.max(1, Math.floor(this.perSecond / 10));
  }

  /** The party's view of the rate, to wait on like any other. */
  for(party: string): Pace {
    return { take: (signal) => this.take(party, signal) };
  }

  take(party: string, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    this.refill();
    if (this.waiting.size === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const waiter: Waiter = {
        resolve,
        signal,
        onAbort: () => {
          const queue = this.waiting.get(party);
          const index = queue?.indexOf(waiter) ?? -1;
          if (index >= 0) queue!.splice(index, 1);
          if (queue?.length === 0) this.waiting.delete(party);
          resolve();
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      const queue = this.waiting.get(party);
      if (queue) queue.push(waiter);
      else this.waiting.set(party, [waiter]);
      this.schedule();
    });
  }

  private hand(): void {
    this.timer = undefined;
    this.refill();
    while (this.tokens >= 1) {
      const next = this.waiting.entries().next();
      if (next.done) break;
      const [party, queue] = next.value;
      const waiter = queue.shift()!;
      this.waiting.delete(party);
      if (queue.length > 0) this.waiting.set(party, queue); // to the end of the round
      this.tokens -= 1;
      waiter.signal.removeEventListener('abort', waiter.onAbort);
      waiter.resolve();
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.waiting.size === 0) return;
    this.timer = setTimeout(() => this.hand(), Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.perSecond)));
  }

  private refill(): void {
    const now = Date.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.perSecond) / 1000);
    this.at = now;
  }
}
