import { TributaryError } from '../errors.ts';
import type { QuotaGrant, QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import { ProxyError } from './errors.ts';
import type { PlanQuota } from './plan.ts';

/**
 * Unverified requests (a credential not yet known good, src/proxy/credentials.ts) wait in a
 * line of their own per key: this short, and this long at most. They are served from an
 * allowance of one request a window or so; a longer line would only hold sockets open.
 */
const UNVERIFIED_WAITING = 2;
const UNVERIFIED_WAIT_MS = 3_000;

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

  private refusal(quota: PlanQuota, ahead: number, why: string, unverified: boolean): ProxyError {
    this.refusedCount++;
    const { rule } = quota;
    const perSlot = unverified ? rule.windowMs / (quota.unverified ?? 1) : rule.windowMs / rule.limit;
    const seconds = Math.max(1, Math.ceil(((ahead + 1) * perSlot) / 1000));
    const what = quota.label ?? 'quota';
    const share = unverified
      ? `its allowance for credentials not yet accepted upstream for it (${quota.unverified ?? 1} per ${rule.windowMs / 1000} s)`
      : `the upstream quota (${rule.limit} requests per ${rule.windowMs / 1000} s, shared with the sync)`;
    return new ProxyError('too_many_requests', `${what}: ${share} is in use: ${why}; retry after ${seconds} s`, { 'retry-after': String(seconds) });
  }

  /**
   * Waits for a slot of the quota. `proven`: the credential is known good for it; otherwise
   * the request waits in the key's unverified line for the unverified allowance.
   */
  async take(quota: PlanQuota, proven: boolean, signal?: AbortSignal): Promise<QuotaGrant> {
    const { rule, also } = quota;
    const key = proven ? quota.key : `${quota.key}#unverified`;
    const ahead = this.waiting.get(key) ?? 0;
    const bound = proven ? this.bound(rule) : UNVERIFIED_WAITING;
    const maxWaitMs = proven ? this.maxWaitMs : Math.min(this.maxWaitMs, UNVERIFIED_WAIT_MS);
    if (ahead >= bound) throw this.refusal(quota, ahead, `${ahead} requests are already waiting`, !proven);
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
      const left = maxWaitMs - (Date.now() - started);
      if (left <= 0) throw this.refusal(quota, ahead, `no slot within ${maxWaitMs / 1000} s`, !proven);
      return await this.options.limiter.acquire(quota.key, rule, {
        kind: proven ? 'client' : 'unverified',
        maxWaitMs: left,
        signal,
        also,
        unverified: quota.unverified,
      });
    } catch (error) {
      if (error instanceof TributaryError && error.code === 'unavailable') {
        throw this.refusal(quota, this.waiting.get(key) ?? 0, `no slot within ${maxWaitMs / 1000} s`, !proven);
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
