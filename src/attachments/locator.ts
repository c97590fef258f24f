import { trimOldest } from '../bounded-map.ts';
import type { AttachmentUrls } from '../kinds/kind.ts';
import { pause } from '../time.ts';

/** A record's attachments as read, and when; `attachments` undefined: the record is gone. */
export interface LocatedRecord {
  readAt: number;
  attachments: Map<string, AttachmentUrls> | undefined;
  /** Attachments asked for that this read did not find: gone, until it is stale. */
  missing: Set<string>;
}

/** Reads the attachments of some records of one table of a sync from the upstream (KindAttachments.locate). */
export type ReadRecords = (recordIds: string[]) => Promise<Map<string, Map<string, AttachmentUrls>>>;

export interface AttachmentLocatorOptions {
  /** How long a read URL is handed out (default URL_TTL_MS); shorter than the upstream keeps it good. */
  ttlMs?: number;
  /** How long a read waits for others of the same table to join it (default 20 ms). */
  batchMs?: number;
}

/**
 * Airtable's URLs are good for two hours or more from when they are read: handed out for one,
 * each redirect also tells the browser how long it may keep it.
 */
export const URL_TTL_MS = 3_600_000;
/**
 * A record, or an attachment, found gone is asked again after this. Only signed links get this
 * far, so an attachment the record lacked when read is read again at once (its link was made
 * from a later read); once that read lacks it too, it is taken for gone this long.
 */
const GONE_TTL_MS = 60_000;
/** Records one read may ask for: Airtable's formula of record ids takes 50 per page. */
const BATCH_MAX = 50;
const CACHE_MAX = 100_000;

interface Batch {
  ids: Set<string>;
  done: Promise<{ readAt: number; found: Map<string, Map<string, AttachmentUrls>> }>;
}

/**
 * Where stable links find the upstream's current URLs: a cache of each record's attachments,
 * read again once its URLs may be stale. A page of 50 images asks for their records at once,
 * so the reads of one table that arrive together are one request to the upstream.
 */
export class AttachmentLocator {
  private readonly cache = new Map<string, LocatedRecord>();
  private readonly batches = new Map<string, Batch>();
  readonly ttlMs: number;
  private readonly batchMs: number;

  constructor(options: AttachmentLocatorOptions = {}) {
    this.ttlMs = options.ttlMs ?? URL_TTL_MS;
    this.batchMs = options.batchMs ?? 20;
  }

  /** The record's attachments, fresh enough to hand out one of `attachmentId`'s URLs. */
  async record(syncId: string, tableId: string, recordId: string, attachmentId: string, read: ReadRecords): Promise<LocatedRecord> {
    const key = `${syncId}/${tableId}/${recordId}`;
    const hit = this.cache.get(key);
    if (hit && this.fresh(hit, attachmentId)) return hit;
    const located = await this.read(`${syncId}/${tableId}`, recordId, read);
    if (located.attachments && !located.attachments.has(attachmentId)) located.missing.add(attachmentId);
    this.cache.delete(key);
    this.cache.set(key, located);
    trimOldest(this.cache, CACHE_MAX);
    return located;
  }

  private fresh(hit: LocatedRecord, attachmentId: string): boolean {
    const age = Date.now() - hit.readAt;
    const goneFor = Math.min(GONE_TTL_MS, this.ttlMs);
    if (!hit.attachments) return age < goneFor;
    return hit.attachments.has(attachmentId) ? age < this.ttlMs : hit.missing.has(attachmentId) && age < goneFor;
  }

  private async read(batchKey: string, recordId: string, read: ReadRecords): Promise<LocatedRecord> {
    let batch = this.batches.get(batchKey);
    if (!batch || batch.ids.size >= BATCH_MAX) {
      const ids = new Set<string>();
      const made: Batch = {
        ids,
        done: pause(this.batchMs).then(async () => {
          // Closed to newcomers from here: they make the next batch.
          if (this.batches.get(batchKey) === made) this.batches.delete(batchKey);
          const readAt = Date.now();
          return { readAt, found: await read([...ids]) };
        }),
      };
      batch = made;
      this.batches.set(batchKey, made);
    }
    batch.ids.add(recordId);
    const { readAt, found } = await batch.done;
    return { readAt, attachments: found.get(recordId), missing: new Set() };
  }
}
