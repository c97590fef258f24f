import { createHmac, randomBytes } from 'node:crypto';
import { Secret } from '../../control/secrets.ts';

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the secret is `whsec_`
 * followed by base64 of random bytes; the signature is `v1,` + base64 of
 * HMAC-SHA256(base64-decoded secret, `${webhook-id}.${webhook-timestamp}.${body}`).
 */
export const SECRET_PREFIX = 'whsec_';

/** A new destination secret: 32 random bytes, as Standard Webhooks prints them. */
export function newWebhookSecret(): Secret {
  return new Secret(SECRET_PREFIX + randomBytes(32).toString('base64'));
}

function keyOf(secret: Secret): Buffer {
  const text = secret.reveal();
  return Buffer.from(text.startsWith(SECRET_PREFIX) ? text.slice(SECRET_PREFIX.length) : text, 'base64');
}

export function signPayload(secret: Secret, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', keyOf(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The headers of one delivery attempt; the timestamp is the attempt's, so each retry is signed afresh. */
export function webhookHeaders(secret: Secret, eventKey: string, body: string, now = Date.now()): Record<string, string> {
  return webhookSigner(secret)(eventKey, body, now);
}

export type WebhookSigner = (eventKey: string, body: string, now?: number) => Record<string, string>;

/** The secret replaced by a rotation, still signing until `untilMs`. */
export interface PreviousSecret {
  secret: Secret;
  untilMs: number;
}

/**
 * webhookHeaders for one destination, its keys decoded once rather than per attempt. While
 * a rotated-out secret is still valid, each delivery carries both signatures, the current
 * one first and space-separated, as Standard Webhooks lets a receiver accept either: so a
 * receiver can switch to the new secret at its own pace. Expiry is checked at each signing.
 */
export function webhookSigner(secret: Secret, previous?: PreviousSecret): WebhookSigner {
  const key = keyOf(secret);
  const old = previous ? { key: keyOf(previous.secret), untilMs: previous.untilMs } : undefined;
  const mac = (k: Buffer, signed: string) => `v1,${createHmac('sha256', k).update(signed).digest('base64')}`;
  return (eventKey, body, now = Date.now()) => {
    const timestamp = Math.floor(now / 1000);
    const signed = `${eventKey}.${timestamp}.${body}`;
    const signature = old && now < old.untilMs ? `${mac(key, signed)} ${mac(old.key, signed)}` : mac(key, signed);
    return {
      'content-type': 'application/json',
      'webhook-id': eventKey,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signature,
      'svc-event-id': eventKey,
    };
  };
}
