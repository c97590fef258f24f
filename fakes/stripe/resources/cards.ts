/**
 * Stripe's test cards, as the magic ids tests use (`pm_card_visa`, `tok_visa`,
 * `pm_card_chargeDeclined`…): what card each stands for and whether charging it fails.
 */
export interface TestCard {
  brand: string;
  last4: string;
  country: string;
  funding: 'credit' | 'debit' | 'prepaid';
  /** A card error code when charging this card fails. */
  decline?: { code: string; decline_code?: string; message: string };
  /** Charges succeed, then the cardholder disputes them for this reason (4000 0000 0000 0259). */
  dispute?: string;
}

const DECLINED = { code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' };

const CARDS: Record<string, TestCard> = {
  visa: { brand: 'visa', last4: '4242', country: 'US', funding: 'credit' },
  visa_debit: { brand: 'visa', last4: '5556', country: 'US', funding: 'debit' },
  mastercard: { brand: 'mastercard', last4: '4444', country: 'US', funding: 'credit' },
  mastercard_debit: { brand: 'mastercard', last4: '8210', country: 'US', funding: 'debit' },
  amex: { brand: 'amex', last4: '8431', country: 'US', funding: 'credit' },
  discover: { brand: 'discover', last4: '1117', country: 'US', funding: 'credit' },
  jcb: { brand: 'jcb', last4: '0505', country: 'JP', funding: 'credit' },
  unionpay: { brand: 'unionpay', last4: '0005', country: 'CN', funding: 'credit' },
  chargeDeclined: { brand: 'visa', last4: '0002', country: 'US', funding: 'credit', decline: DECLINED },
  // Attaches to a customer fine (the fake never checks cards on attach), then every charge declines.
  chargeCustomerFail: { brand: 'visa', last4: '0341', country: 'US', funding: 'credit', decline: DECLINED },
  createDispute: { brand: 'visa', last4: '0259', country: 'US', funding: 'credit', dispute: 'fraudulent' },
  chargeDeclinedInsufficientFunds: {
    brand: 'visa',
    last4: '9995',
    country: 'US',
    funding: 'credit',
    decline: { code: 'card_declined', decline_code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
  },
  chargeDeclinedExpiredCard: {
    brand: 'visa',
    last4: '0069',
    country: 'US',
    funding: 'credit',
    decline: { code: 'expired_card', decline_code: 'expired_card', message: 'Your card has expired.' },
  },
};

/** The test card behind `pm_card_<name>` or `tok_<name>`, if it is one. */
export function testCard(id: string): TestCard | undefined {
  const m = /^(?:pm_card|tok)_([A-Za-z_]+)$/.exec(id);
  return m ? CARDS[m[1] as string] : undefined;
}

export const CARD_BRANDS = ['visa', 'mastercard', 'amex', 'discover'] as const;

export function cardOfBrand(brand: string): TestCard {
  return CARDS[brand] ?? (CARDS.visa as TestCard);
}

/** A stable card fingerprint: the same card number always gives the same one. */
export function fingerprintOf(card: TestCard): string {
  const text = `${card.brand}${card.last4}`;
  let out = '';
  let h = 0x811c9dc5;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  for (let i = 0; i < 16; i++) {
    h = Math.imul(h ^ text.charCodeAt(i % text.length) ^ i, 0x01000193) >>> 0;
    out += alphabet[h % alphabet.length];
  }
  return out;
}

/** The test card a payment method was made from, by its number. */
function cardOf(pm: Record<string, unknown>): TestCard | undefined {
  const card = pm.card as { brand?: string; last4?: string } | undefined;
  if (!card) return undefined;
  for (const c of Object.values(CARDS)) if (c.last4 === card.last4 && c.brand === card.brand) return c;
  return undefined;
}

/** Whether charging this payment method fails, by the test card number it was made from. */
export function declineOf(pm: Record<string, unknown>): TestCard['decline'] {
  return cardOf(pm)?.decline;
}

/** The dispute reason a successful charge on this payment method draws, if its card is Stripe's dispute test card. */
export function disputeOf(pm: Record<string, unknown>): string | undefined {
  return cardOf(pm)?.dispute;
}
