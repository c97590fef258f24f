import { z } from 'zod';

/** A Stripe sync's settings (the management API's `settings`): Turbo alone. */
export const stripeSettingsSchema = z.object({ turbo: z.boolean().describe("The sync may use all of the account's Stripe rate limit (else 80%)") }).strict();

export type StripeSettings = z.infer<typeof stripeSettingsSchema>;

export const STRIPE_DEFAULT_SETTINGS: StripeSettings = { turbo: false };
