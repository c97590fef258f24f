import { z } from 'zod';

/** A Stripe sync's settings (the management API's `settings`). */
export const stripeSettingsSchema = z
  .object({
    turbo: z.boolean().describe("The sync may use all of the account's Stripe rate limit (else 80%)"),
    connected_accounts: z
      .boolean()
      .describe("A platform's connected accounts are replicated too (Stripe-Account), into the same tables with their id in stripe_account"),
  })
  .strict();

export type StripeSettings = z.infer<typeof stripeSettingsSchema>;

export const STRIPE_DEFAULT_SETTINGS: StripeSettings = { turbo: false, connected_accounts: false };
