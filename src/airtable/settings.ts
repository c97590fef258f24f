import { z } from 'zod';

/** An Airtable sync's settings (the management API's `settings`). */
export const airtableSettingsSchema = z
  .object({
    turbo: z.boolean().describe("The sync may take all 5 of the base's requests a second (else 3); clients still go first"),
    debounce_ms: z
      .number()
      .int()
      .min(0)
      .max(86_400_000)
      .describe('A changed record is written once nothing has touched it for this many milliseconds (creates and updates; deletes are immediate)'),
    lookup_as: z.enum(['text[]', 'text']).describe('Lookup fields as arrays, or as text joined with `, `'),
    intelligent_cast: z.boolean().describe("Cast by the field's options: a link limited to one record becomes `text`, not `text[]`"),
    stable_attachment_links: z
      .boolean()
      .describe(
        "Attachment columns hold links served by Tributary that redirect to a fresh Airtable URL, instead of Airtable's URLs that expire after a few hours",
      ),
  })
  .strict();

export type AirtableSettings = z.infer<typeof airtableSettingsSchema>;

export const AIRTABLE_DEFAULT_SETTINGS: AirtableSettings = {
  turbo: false,
  debounce_ms: 0,
  lookup_as: 'text[]',
  intelligent_cast: true,
  stable_attachment_links: false,
};
