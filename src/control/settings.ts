import { z } from 'zod';

/** Per-sync settings (the management API's `settings`). Airtable uses all four; Stripe only `turbo`. */
export const airtableSettingsSchema = z
  .object({
    turbo: z.boolean(),
    debounce_ms: z.number().int().min(0).max(86_400_000),
    lookup_as: z.enum(['text[]', 'text']),
    intelligent_cast: z.boolean(),
  })
  .strict();

export const stripeSettingsSchema = z.object({ turbo: z.boolean() }).strict();

export type AirtableSettings = z.infer<typeof airtableSettingsSchema>;
export type StripeSettings = z.infer<typeof stripeSettingsSchema>;
export type SyncSettings = AirtableSettings | StripeSettings;
export type SyncKind = 'airtable' | 'stripe';

export const defaultSettings = {
  airtable: { turbo: false, debounce_ms: 0, lookup_as: 'text[]', intelligent_cast: true } satisfies AirtableSettings,
  stripe: { turbo: false } satisfies StripeSettings,
};

export const settingsPatchSchema = {
  airtable: airtableSettingsSchema.partial().strict(),
  stripe: stripeSettingsSchema.partial().strict(),
};
