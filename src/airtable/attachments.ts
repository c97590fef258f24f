import type { AttachmentContext, AttachmentUrls, KindAttachments } from '../kinds/kind.ts';
import { isObject } from './cells.ts';
import { clientForSync } from './kind-client.ts';
import type { AirtableSettings } from './settings.ts';

/** Every attachment in a record's cells, its own fields' and its lookups' alike: they are listed the same way. */
function attachmentsOf(fields: Record<string, unknown>): Map<string, AttachmentUrls> {
  const found = new Map<string, AttachmentUrls>();
  for (const cell of Object.values(fields)) {
    if (!Array.isArray(cell)) continue;
    for (const item of cell) {
      if (!isObject(item) || typeof item.id !== 'string' || typeof item.url !== 'string' || typeof item.filename !== 'string') continue;
      const thumbnails: Record<string, string> = {};
      if (isObject(item.thumbnails)) {
        for (const [size, thumbnail] of Object.entries(item.thumbnails)) {
          if (isObject(thumbnail) && typeof thumbnail.url === 'string') thumbnails[size] = thumbnail.url;
        }
      }
      found.set(item.id, { url: item.url, thumbnails });
    }
  }
  return found;
}

/**
 * Airtable's attachment URLs expire after a few hours; with `stable_attachment_links` the
 * columns hold links of Tributary's that name the record, which is read again by id for a
 * fresh URL. A client's read, so it goes before the sync's in the base's quota.
 */
export const airtableAttachments: KindAttachments = {
  enabled: (settings) => (settings as Partial<AirtableSettings>).stable_attachment_links === true,
  async locate(context: AttachmentContext, tableId, recordIds) {
    const client = clientForSync(context);
    const records = await client.recordsById(tableId, recordIds);
    return new Map(records.map((r) => [r.id, attachmentsOf(r.fields)]));
  },
};
