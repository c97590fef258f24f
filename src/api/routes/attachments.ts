import type Router from '@koa/router';
import type { AttachmentLinks } from '../../attachments/links.ts';
import { AttachmentLocator } from '../../attachments/locator.ts';
import { ReadLately } from '../../bounded-map.ts';
import { databaseAway } from '../../db/transient.ts';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, toError } from '../../errors.ts';
import type { KindContext, SourceKind } from '../../kinds/kind.ts';
import { validateQuery } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { z } from '../zod.ts';

export interface AttachmentApiOptions {
  /** Signs and checks the links; without it the route answers 404 to every link. */
  attachmentLinks?: AttachmentLinks;
  /** How a kind reaches its upstream from this process (the sync service's kind context). */
  kindContext?: (kind: SourceKind) => KindContext;
  /** How long a read URL is handed out (tests; default an hour). */
  attachmentUrlTtlMs?: number;
}

/** A sync looked up this recently is not asked of the control database again: a revoked link stops within this. */
const SYNC_CACHE_MS = 10_000;
const SYNC_CACHE_MAX = 10_000;

/** Every refusal of a link reads the same, so none tells a sync, record or attachment that exists from one that does not. */
const NO_SUCH =
  'no such attachment: the link is not one of this service’s, or it was revoked (the sync deleted, or its stable links turned off), or the attachment is gone';

const linkParams = z.object({
  sync: z.string().describe('The sync id'),
  table: z.string().describe('The upstream table id'),
  record: z.string().describe('The upstream record id'),
  attachment: z.string().describe('The upstream attachment id'),
  mac: z.string().describe('The link’s signature'),
});

const linkQuery = z
  .object({
    size: z
      .enum(['small', 'large', 'full'])
      .optional()
      .describe("A thumbnail of the file instead (images and documents Airtable makes thumbnails of): Airtable's `small`, `large` or `full`"),
  })
  .strict();

/**
 * GET /attachments/…: a stable link (src/attachments/links.ts) to an attachment whose upstream
 * URL expires, answered with a redirect to a fresh one. The link is its own credential, like the
 * upstream's signed URLs: it takes no token, and anyone who has it may follow it while the sync
 * exists with its setting on.
 */
export function attachmentRoutes(router: Router, api: ApiOptions & AttachmentApiOptions, doc: ApiDocument): void {
  const locator = new AttachmentLocator({ ttlMs: api.attachmentUrlTtlMs });
  const syncs = new ReadLately<SyncRecord | undefined>(SYNC_CACHE_MAX);
  // The control database away is a 503 (errorMiddleware), as everywhere.
  const syncOf = (id: string) =>
    syncs.get(
      id,
      () => SYNC_CACHE_MS,
      () => api.syncs.get(id),
    );

  doc.route({
    method: 'get',
    path: '/attachments/:sync/:table/:record/:attachment/:mac',
    operationId: 'followAttachmentLink',
    tag: 'syncs',
    summary: 'A stable attachment link (signed)',
    description:
      "What an attachment column holds when the sync's `stable_attachment_links` is on: a redirect to the upstream's current URL of the file, read again when the one known may have expired. The link is signed and is its own credential (no token): anyone who has it may follow it until the sync is deleted or the setting is turned off.",
    access: 'public',
    params: linkParams,
    query: linkQuery,
    answers: { 302: { description: 'To the file’s current upstream URL (`Location`), which the answer’s `Cache-Control` says how long to keep' } },
    errors: {
      404: 'The link is not signed by this service, or it was revoked, or the record or attachment (or the thumbnail asked for) is gone',
      502: 'The upstream could not be read',
      503: 'The control database is unreachable',
    },
  });
  router.get('/attachments/:sync/:table/:record/:attachment/:mac', async (ctx) => {
    const { sync: syncId, table, record, attachment, mac } = ctx.params as z.infer<typeof linkParams>;
    const { size } = validateQuery(linkQuery, ctx);
    const ref = { tableId: table, recordId: record, attachmentId: attachment };
    if (!api.attachmentLinks?.verify(syncId, ref, mac)) throw new TributaryError('not_found', NO_SUCH);
    const sync = await syncOf(syncId);
    const kind = sync && api.kinds.find(sync.kind);
    if (sync?.state !== 'active' || !kind?.attachments?.enabled(sync.settings) || !api.kindContext) throw new TributaryError('not_found', NO_SUCH);
    const files = kind.attachments;
    const context = api.kindContext(kind);
    const located = await locator
      .record(syncId, table, record, attachment, async (ids) => files.locate({ ...context, sync, key: await api.syncs.apiKey(sync.id) }, table, ids))
      .catch((error: unknown) => {
        if (error instanceof TributaryError || databaseAway(error)) throw error;
        api.logger.warn({ sync: syncId, err: toError(error) }, 'could not read an attachment’s record upstream');
        throw new TributaryError('bad_gateway', 'the upstream could not be read for the attachment’s current URL; try again later', { expose: true });
      });
    const urls = located.attachments?.get(attachment);
    const url = size ? urls?.thumbnails[size] : urls?.url;
    if (!url) throw new TributaryError('not_found', NO_SUCH);
    const keepS = Math.max(0, Math.floor((located.readAt + locator.ttlMs - Date.now()) / 1000));
    ctx.set('Cache-Control', `private, max-age=${keepS}`);
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.redirect(url);
  });
}
