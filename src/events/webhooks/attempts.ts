import type { Secret } from '../../control/secrets.ts';
import type { AttemptOutcome } from './deliveries.ts';
import { DestinationHealth } from './health.ts';
import type { Item } from './lanes.ts';
import { RateLimit } from './rate-limit.ts';
import type { Sender } from './send.ts';
import type { AttemptBounds } from './shared-bounds.ts';
import { type PreviousSecret, webhookSigner, type WebhookSigner } from './signature.ts';

/** What a destination's deliveries are signed with: its secret, and for a while the one it replaced. */
export interface Signing {
  secret: Secret;
  previous?: PreviousSecret;
}

/** One attempt's outcome, with what the worker decides by beyond success. */
export interface AttemptResult extends AttemptOutcome {
  ok: boolean;
  /** The answer's Retry-After, in ms from the attempt. */
  retryAfterMs: number | undefined;
  /** The destination answered 410 Gone: it asks to be sent nothing more. */
  gone: boolean;
  /** Why the destination is to be disabled after this attempt, if it is. */
  disable?: string | undefined;
}

export interface AttempterOptions {
  url: URL;
  sender: Sender;
  signing: Signing;
  /** Attempts per second across all lanes; null: unlimited. */
  maxPerSecond: number | null;
  /** Since when every attempt has failed, as saved; and for how long that may go on. */
  failingSince: Date | null;
  disableAfterMs: number;
  /** Bounds shared with other webhooks (per destination host, per account), kept after its own rate. */
  shared?: AttemptBounds;
}

/**
 * Makes one destination's attempts: waits for the rate limit, signs, sends, and judges from
 * the outcomes whether the destination is to be disabled. The signing and the rate change in
 * place when the secret is rotated or max_per_second changed, without stopping the worker
 * (or losing its place in the log).
 */
export class Attempter {
  private sign: WebhookSigner;
  private limit: RateLimit | undefined;
  private readonly health: DestinationHealth;

  constructor(private readonly options: AttempterOptions) {
    this.sign = webhookSigner(options.signing.secret, options.signing.previous);
    this.limit = options.maxPerSecond === null ? undefined : new RateLimit(options.maxPerSecond);
    this.health = new DestinationHealth(options.failingSince, options.disableAfterMs);
  }

  /** Since when every attempt has failed (saved with the cursor); null after a success. */
  get failingSince(): Date | null {
    return this.health.failingSince;
  }

  set signing(signing: Signing) {
    this.sign = webhookSigner(signing.secret, signing.previous);
  }

  set maxPerSecond(perSecond: number | null) {
    if (perSecond === null) this.limit = undefined;
    else if (this.limit) this.limit.rate = perSecond;
    else this.limit = new RateLimit(perSecond);
  }

  async attempt(item: Item, signal: AbortSignal): Promise<AttemptResult> {
    await this.limit?.take(signal);
    const shared = this.options.shared;
    for (const pace of shared?.paces ?? []) await pace.take(signal);
    const send = () => {
      const at = new Date();
      const headers = this.sign(item.eventKey, item.value, at.getTime());
      return this.options.sender.send(this.options.url, headers, item.value, signal).then((sent) => ({ at, sent }));
    };
    const { at, sent } = await (shared ? shared.inFlight(send) : send());
    const result: AttemptResult = { ok: sent.ok, statusCode: sent.status, error: sent.error, at, retryAfterMs: sent.retryAfterMs, gone: sent.status === 410 };
    // An attempt cut short by a stop says nothing about the destination.
    if (!signal.aborted) result.disable = this.health.record(result);
    return result;
  }
}
