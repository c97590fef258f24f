import { TributaryError } from '../errors.ts';
import type { QuotaGrant, QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import { ProxyError } from './errors.ts';

export interface ClientQueueOptions {
  limiter: QuotaLimiter;
  /** How long a client request may wait for a slot before the proxy answers 429 (default 10 s). */
  maxWaitMs?: number;
  /**
   * How many client requests may wait per key in this process. Default: as many as the quota
   * can serve within maxWaitMs (Airtable 5/s × 10 s = 50); the next one is refused at once.
   */
  maxWaiting?: number;
}

export interface QueueStats {
  waiting: number;
  refused: number;
}

/**
 * Client requests wait for the shared quota in a bounded FIFO per upstream key. The head of
 * each line asks the shared limiter (as a client, so the sync steps aside); the rest wait
 * their turn in memory. Past the bound (too many waiting, or a wait longer than maxWaitMs)
 * the proxy answers 429 with Retry-After, so the upstream never sees the excess.
 */
export class ClientQueue {
  private readonly maxWaitMs: number;
  private readonly tails = new Map<string, Promise<void>>();
  private readonly waiting = new Map<string, number>();
  private refusedCount = 0;

  constructor(private readonly options: ClientQueueOptions) {
    this.maxWaitMs = options.maxWaitMs ?? 10_000;
  }

  get stats(): QueueStats {
    let waiting = 0;
    for (const n of this.waiting.values()) waiting += n;
    return { waiting, refused: this.refusedCount };
  }

  private bound(rule: QuotaRule): number {
    return this.options.maxWaiting ?? Math.max(1, Math.ceil((rule.limit * this.maxWaitMs) / rule.windowMs));
  }

  private refusal(key: string, rule: QuotaRule, ahead: number, why: string): ProxyError {
    this.refusedCount++;
    const seconds = Math.max(1, Math.ceil(((ahead + 1) * rule.windowMs) / rule.limit / 1000));
    const what = key.startsWith('stripe:') ? 'Stripe account' : key.startsWith('airtable-token:') ? 'Airtable token' : `Airtable base ${key}`;
    return new ProxyError(
      'too_many_requests',
      `the upstream quota of this ${what} (${rule.limit} requests per ${rule.windowMs / 1000} s, shared with the sync) is in use: ${why}; retry after ${seconds} s`,
      { 'retry-after': String(seconds) },
    );
  }

  /** `also`: a second quota the request counts against (an Airtable token's), see QuotaLimiter. */
  async take(key: string, rule: QuotaRule, signal?: AbortSignal, also?: { key: string; rule: QuotaRule }): Promise<QuotaGrant> {
    const ahead = this.waiting.get(key) ?? 0;
    if (ahead >= this.bound(rule)) throw this.refusal(key, rule, ahead, `${ahead} requests are already waiting`);
    this.waiting.set(key, ahead + 1);
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    const started = Date.now();
    try {
      await previous;
      signal?.throwIfAborted();
      const left = this.maxWaitMs - (Date.now() - started);
      if (left <= 0) throw this.refusal(key, rule, ahead, `no slot within ${this.maxWaitMs / 1000} s`);
      return await this.options.limiter.acquire(key, rule, { kind: 'client', maxWaitMs: left, signal, also });
    } catch (error) {
      if (error instanceof TributaryError && error.code === 'unavailable') {
        throw this.refusal(key, rule, this.waiting.get(key) ?? 0, `no slot within ${this.maxWaitMs / 1000} s`);
      }
      throw error;
    } finally {
      release();
      const left = (this.waiting.get(key) ?? 1) - 1;
      if (left > 0) this.waiting.set(key, left);
      else this.waiting.delete(key);
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
