/**
 * Stripe's webhook signature as the hooks route checks it: a header stripe-node makes for a
 * body and a secret is accepted, so is a pair of signatures while a secret is rolled; no
 * header, a malformed one, another secret, a time more than five minutes off, or a changed
 * byte is refused.
 */
import Stripe from 'stripe';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SIGNATURE_TOLERANCE_S, verifyStripeSignature } from '../src/stripe/push.ts';

const stripe = new Stripe('sk_test_signature0000000000000001');
const SECRET = 'whsec_test0000000000000000000000000001';
const OTHER = 'whsec_test0000000000000000000000000002';
const payload = JSON.stringify({ id: 'evt_1', object: 'event', account: 'acct_1', type: 'customer.updated' });
const body = Buffer.from(payload);
const now = Math.floor(Date.now() / 1000);
const header = (options: { secret?: string; timestamp?: number; payload?: string } = {}) =>
  stripe.webhooks.generateTestHeaderString({ payload: options.payload ?? payload, secret: options.secret ?? SECRET, timestamp: options.timestamp ?? now });

test("stripe-node's signature is accepted, and so is either of two while a secret is rolled", () => {
  assert.ok(verifyStripeSignature(header(), body, SECRET, now));
  const v1 = (h: string) => h.split(',').find((p) => p.startsWith('v1='))!;
  const rolled = `t=${now},${v1(header({ secret: OTHER }))},${v1(header())}`;
  assert.ok(verifyStripeSignature(rolled, body, SECRET, now));
  assert.ok(verifyStripeSignature(rolled, body, OTHER, now));
  // Within the tolerance either way.
  assert.ok(verifyStripeSignature(header({ timestamp: now - SIGNATURE_TOLERANCE_S }), body, SECRET, now));
});

test('unsigned, malformed, foreign, stale, early or altered deliveries are refused', () => {
  assert.not.ok(verifyStripeSignature(undefined, body, SECRET, now), 'no header');
  assert.not.ok(verifyStripeSignature('', body, SECRET, now), 'empty');
  assert.not.ok(verifyStripeSignature(`t=${now}`, body, SECRET, now), 'no v1');
  assert.not.ok(verifyStripeSignature(`t=${now},v1=abc`, body, SECRET, now), 'v1 not a digest');
  assert.not.ok(verifyStripeSignature(header().replace(/t=\d+/, 't=soon'), body, SECRET, now), 't not a number');
  assert.not.ok(verifyStripeSignature(header({ secret: OTHER }), body, SECRET, now), 'another secret');
  assert.not.ok(verifyStripeSignature(header({ timestamp: now - 301 }), body, SECRET, now), '301 s old');
  assert.not.ok(verifyStripeSignature(header({ timestamp: now + 301 }), body, SECRET, now), '301 s ahead');
  const altered = Buffer.from(payload.replace('acct_1', 'acct_2'));
  assert.not.ok(verifyStripeSignature(header(), altered, SECRET, now), 'one byte changed');
  assert.not.ok(verifyStripeSignature('x'.repeat(5000), body, SECRET, now), 'a huge header');
});

test.run();
