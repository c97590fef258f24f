import { createHmac, timingSafeEqual } from 'node:crypto';

/** What a receiver needs of a delivery to check it: its three headers and the body as sent. */
export interface SignedDelivery {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
}

/**
 * A receiver's check, written from the Standard Webhooks spec rather than from the product's
 * signer: the key is the base64 after `whsec_`; the signed content is `id.timestamp.body`;
 * the header lists `v1,<base64 HMAC-SHA256>` signatures, space-separated, and a delivery is
 * genuine when any of them matches.
 */
export function verifies(secret: string, delivery: SignedDelivery): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${delivery.id}.${delivery.timestamp}.${delivery.body}`).digest();
  return delivery.signature.split(' ').some((entry) => {
    const [version, signature] = entry.split(',');
    const given = Buffer.from(signature ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}
