import { createHmac, timingSafeEqual } from 'node:crypto';
import type { InboundDelivery } from '../kinds/kind.ts';

/**
 * Whether a webhook ping is Airtable's: `X-Airtable-Content-MAC: hmac-sha256=<hex>`, the
 * HMAC-SHA256 of the raw body keyed with the webhook's secret (macSecretBase64, decoded).
 * A ping only says "read the payloads", so a valid one replayed costs a read, nothing more.
 */
export function verifyPing(delivery: InboundDelivery): boolean {
  const match = pingMac(delivery.headers);
  if (!match) return false;
  const expected = createHmac('sha256', Buffer.from(delivery.secret.reveal(), 'base64')).update(delivery.body).digest();
  return timingSafeEqual(expected, Buffer.from(match[1]!, 'hex'));
}

const pingMac = (headers: InboundDelivery['headers']) => {
  const header = headers['x-airtable-content-mac'];
  return typeof header === 'string' ? /^hmac-sha256=([0-9a-f]{64})$/i.exec(header.trim()) : null;
};

/** Whether a ping carries a MAC of Airtable's form, before its body is read. */
export const pingSigned = (headers: InboundDelivery['headers']): boolean => pingMac(headers) !== null;
