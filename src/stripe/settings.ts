import { z } from 'zod';

/** A Stripe sync's settings (the management API's `settings`): Turbo alone. */
export const stripeSettingsSchema = z.object({ turbo: z.boolean() }).strict();

export type StripeSettings = z.infer<typeof stripeSettingsSchema>;

export const STRIPE_DEFAULT_SETTINGS: StripeSettings = { turbo: false };
