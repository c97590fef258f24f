/**
 * Idempotent POSTs, per account: the first answer to a key is saved with the request's
 * endpoint and parameters; a retry with the same ones gets that answer again, anything else
 * an idempotency_error. Keys live 24 hours. Like Stripe, answers to requests that failed
 * validation (or auth, or the rate limit) are not saved, so those can be retried.
 */
import { idempotencyMismatch, idempotencyOtherEndpoint } from './errors.ts';

export interface SavedAnswer {
  status: number;
  body: unknown;
  requestId: string;
}

interface Saved extends SavedAnswer {
  endpoint: string;
  fingerprint: string;
  expiresAt: number;
}

const TTL_MS = 24 * 3_600_000;

export class IdempotencyStore {
  private readonly saved = new Map<string, Saved>();
  private saves = 0;

  /** The saved answer to replay, undefined for a new key; throws when the key was used differently. */
  lookup(key: string, endpoint: string, fingerprint: string, nowMs: number): SavedAnswer | undefined {
    const s = this.saved.get(key);
    if (!s) return undefined;
    if (s.expiresAt <= nowMs) {
      this.saved.delete(key);
      return undefined;
    }
    if (s.endpoint !== endpoint) throw idempotencyOtherEndpoint(key, s.endpoint, endpoint);
    if (s.fingerprint !== fingerprint) throw idempotencyMismatch(key);
    return s;
  }

  save(key: string, endpoint: string, fingerprint: string, answer: SavedAnswer, nowMs: number): void {
    this.saved.set(key, { ...answer, endpoint, fingerprint, expiresAt: nowMs + TTL_MS });
    // stripe-node sends a fresh key with every POST: sweep now and then so long runs stay small.
    if (++this.saves % 1000 === 0) for (const [k, s] of this.saved) if (s.expiresAt <= nowMs) this.saved.delete(k);
  }
}
