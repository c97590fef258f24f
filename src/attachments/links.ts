import { createHmac } from 'node:crypto';
import { constantTimeEqual } from '../control/secrets.ts';

/** One attachment of one record of one table of a sync: what a stable link names. */
export interface AttachmentRef {
  tableId: string;
  recordId: string;
  attachmentId: string;
}

/** Makes a sync's links (the converters of its attachment columns hold one). */
export interface SyncAttachmentLinks {
  link(ref: AttachmentRef): string;
}

/** Upstream ids as they appear in a link: letters and digits, as Airtable's are. */
const ID = /^[A-Za-z0-9]{1,64}$/;
/** The ids a link names, in its order; each of the form ID. */
const idsOf = (ref: AttachmentRef) => [ref.tableId, ref.recordId, ref.attachmentId];
const nameable = (ref: AttachmentRef) => idsOf(ref).every((id) => ID.test(id));

/** 128 bits of the HMAC, base64url: unguessable, and short enough for a column of links. */
const MAC_CHARS = 22;

/**
 * Stable links to upstream files whose own URLs expire (Airtable's attachments):
 * `<origin>/attachments/<sync>/<table>/<record>/<attachment>/<mac>`. The MAC, keyed by a key
 * derived from the service's secret key, covers every part, so a link names exactly one
 * attachment of one sync and no other can be made from it; the route that answers a link
 * (api/routes/attachments.ts) checks it before it reads anything.
 */
export class AttachmentLinks {
  readonly #key: Buffer;
  readonly #origin: () => string;

  /** `origin`: where the API is reached (TRIBUTARY_PUBLIC_URL, else its own address), read as each link is made. */
  constructor(options: { key: Buffer; origin: () => string }) {
    this.#key = options.key;
    this.#origin = options.origin;
  }

  forSync(syncId: string): SyncAttachmentLinks {
    return {
      link: (ref) => {
        if (!nameable(ref)) throw new Error(`not an attachment a link can name: ${idsOf(ref).join('/')}`);
        return `${this.#origin()}/attachments/${syncId}/${idsOf(ref).join('/')}/${this.mac(syncId, ref)}`;
      },
    };
  }

  /** Whether `mac` is this service's for the attachment; ids of the wrong form never are. */
  verify(syncId: string, ref: AttachmentRef, mac: string): boolean {
    if (!nameable(ref)) return false;
    return mac.length === MAC_CHARS && constantTimeEqual(mac, this.mac(syncId, ref));
  }

  private mac(syncId: string, ref: AttachmentRef): string {
    return createHmac('sha256', this.#key)
      .update(`${syncId}/${idsOf(ref).join('/')}`)
      .digest('base64url')
      .slice(0, MAC_CHARS);
  }
}
