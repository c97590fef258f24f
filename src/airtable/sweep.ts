import type { SyncAttachmentLinks } from '../attachments/links.ts';
import type pg from 'pg';
import type { Logger } from '../log.ts';
import { qualified } from '../writer/shape.ts';
import { BatchWriter } from '../writer/batch.ts';
import { openCopy } from '../writer/copy.ts';
import type { TableShape } from '../writer/shape.ts';
import { SeenKeys } from '../writer/seen-keys.ts';
import { writeFetched } from '../writer/fetched.ts';
import { ensureMarks } from '../writer/marks.ts';
import type { Row } from '../writer/upsert.ts';
import { AirtableError, type AirtableClient } from './client.ts';
import type { TableMapping } from './schema.ts';
import { copyLineOf, rowOf, shapeOf } from './tables.ts';
import type { SyncSchemas } from '../syncdb/schemas.ts';
import type { ListPage } from './types.ts';

/** Where pages come from: the Airtable client (or, in a benchmark, pages held in memory). */
export type PageSource = Pick<AirtableClient, 'listPage'>;

export interface SweepContext {
  airtable: PageSource;
  db: pg.Pool;
  /** The sync's schemas: sweeps write its live one, rebuilds its swap one. */
  schemas: SyncSchemas;
  logger: Logger;
  /** The sync's stable attachment links, for a mapping that uses them. */
  links?: SyncAttachmentLinks;
  /** True when a fresher copy of the record was written since `fetchedAt` (change capture, debounce). */
  skip(tableId: string, recordId: string, fetchedAt: number): boolean;
  onPage?(listed: number): Promise<void>;
  /** Records left out because a proxied write may be newer than their page: to be fetched again. */
  held?(tableId: string, recordIds: string[]): void;
  /**
   * Rows the listing did not hold, made too recently for it to prove them gone (see
   * CREATED_MARGIN_MS): to be fetched by id, which deletes those Airtable no longer has.
   */
  unproven?(tableId: string, recordIds: string[]): void;
  /** See CREATED_MARGIN_MS; tests with records made seconds ago set it lower. */
  createdMarginMs?: number;
}

export interface SweepResult {
  listed: number;
  written: number;
  /** Of the rows written, those that were not there (the rest differed). */
  inserted: number;
  deleted: number;
  /** Rows handed to `unproven`. */
  unproven: number;
}

/**
 * Records created upstream after a listing began are not in it; their createdTime says
 * so. This margin covers the clock difference between us and upstream.
 */
const CREATED_MARGIN_MS = 60_000;
const MAX_LISTING_RESTARTS = 3;

/** Rows are written in batches of about this many: one statement per page would cost 3x. */
const BATCH_ROWS = 1000;

/**
 * Lists a whole table and writes every record: upserts into a live table (`schema` the
 * sync's live schema), COPY into a fresh rebuild (its swap schema). Only a listing that reached its last page
 * proves which rows are gone: any failure before that throws, and
 * nothing is deleted. Seen ids are kept in memory, or in a temporary table for a large
 * table (writer/seen-keys.ts), so memory stays flat however large the table is.
 */
export async function sweepTable(ctx: SweepContext, mapping: TableMapping, schema: string, options: { deleteMissing: boolean }): Promise<SweepResult> {
  const shape = shapeOf(mapping, schema);
  const rebuild = schema === ctx.schemas.swap;
  const client = await ctx.db.connect();
  const result: SweepResult = { listed: 0, written: 0, inserted: 0, deleted: 0, unproven: 0 };
  const seen = new SeenKeys(client);
  let failed = false;
  try {
    for (let restarts = 0; ; restarts++) {
      await seen.clear();
      if (rebuild) await client.query(`TRUNCATE ${qualified(shape)}`);
      const listingStarted = Date.now();
      try {
        if (rebuild) await loadFresh(ctx, client, mapping, shape, result);
        else await sweepLive(ctx, client, mapping, shape, result, options.deleteMissing ? seen : undefined);
      } catch (error) {
        // An expired iterator means "start the listing again", not "the table is broken".
        if (error instanceof AirtableError && error.kind === 'iterator' && restarts < MAX_LISTING_RESTARTS) {
          ctx.logger.info({ table: mapping.name }, 'listing iterator expired; listing the table again');
          result.listed = 0;
          continue;
        }
        failed = true;
        throw error;
      }
      if (options.deleteMissing) {
        const unseen = await seen.deleteUnseen(shape, 'created_time', new Date(listingStarted - (ctx.createdMarginMs ?? CREATED_MARGIN_MS)));
        result.deleted = unseen.deleted;
        // Kept by the margin, they used to stay until a sweep a minute later, even when Airtable
        // had deleted them and change capture had not brought that (a record deleted upstream
        // stayed in the database past a complete sweep in the simulation).
        result.unproven = unseen.unproven.length;
        if (unseen.unproven.length > 0) ctx.unproven?.(mapping.tableId, unseen.unproven);
      }
      return result;
    }
  } finally {
    await seen.release().catch(() => undefined);
    // After an abandoned COPY the connection is not trusted again.
    client.release(failed);
  }
}

/** A rebuild: one COPY into the fresh table in the swap schema, fed page by page. */
async function loadFresh(ctx: SweepContext, client: pg.PoolClient, mapping: TableMapping, shape: TableShape, result: SweepResult) {
  const copy = openCopy(client, shape);
  try {
    await listAll(ctx, mapping, async (page) => {
      let text = '';
      for (const record of page.records) text += copyLineOf(mapping, record, ctx.links);
      await copy.write(text);
      result.listed += page.records.length;
      await ctx.onPage?.(result.listed);
    });
  } catch (error) {
    await copy.abort();
    throw error;
  }
  await copy.end();
  result.written = result.listed;
}

/** A live table: upserts that skip unchanged rows, and the ids seen, batch by batch. */
async function sweepLive(
  ctx: SweepContext,
  client: pg.PoolClient,
  mapping: TableMapping,
  shape: TableShape,
  result: SweepResult,
  seenKeys: SeenKeys | undefined,
) {
  await ensureMarks(ctx.db, ctx.schemas);
  // Each batch: its rows, then its ids as seen, on this one connection in turn.
  const writer = new BatchWriter<{ id: string; row: Row | null; fetchedAt: number }>(async (batch) => {
    // Records written through the proxy since their page was fetched keep the proxy's copy,
    // and are fetched again (writer/fetched.ts).
    const fetchedAt = Math.min(...batch.map((item) => item.fetchedAt));
    const rows = batch.flatMap((item) => (item.row ? [item.row] : []));
    const seen = seenKeys ? () => seenKeys.add(batch.map((i) => i.id)) : undefined;
    const { written, inserted, held } = await writeFetched(client, shape, mapping.tableId, rows, fetchedAt, seen);
    result.inserted += inserted;
    if (held.length > 0) ctx.held?.(mapping.tableId, held);
    return written;
  }, BATCH_ROWS);
  await listAll(ctx, mapping, async (page, fetchedAt) => {
    // The table may already hold a fresher copy of a record (change capture): keep it.
    await writer.add(
      page.records.map((record) => ({
        id: record.id,
        row: ctx.skip(mapping.tableId, record.id, fetchedAt) ? null : rowOf(mapping, record, ctx.links),
        fetchedAt,
      })),
    );
    result.listed += page.records.length;
    await ctx.onPage?.(result.listed);
  });
  result.written += await writer.close();
}

/** Walks the pages, fetching the next page while the current one is written. */
async function listAll(ctx: SweepContext, mapping: TableMapping, onPage: (page: ListPage, fetchedAt: number) => Promise<void>): Promise<void> {
  const fetch = async (offset?: string): Promise<{ page: ListPage; fetchedAt: number }> => {
    const fetchedAt = Date.now();
    return { page: await ctx.airtable.listPage(mapping.tableId, { offset }), fetchedAt };
  };
  let next: Promise<{ page: ListPage; fetchedAt: number }> | undefined = fetch();
  while (next) {
    const { page, fetchedAt }: { page: ListPage; fetchedAt: number } = await next;
    next = page.offset ? fetch(page.offset) : undefined;
    // Keep the pending fetch from turning into an unhandled rejection if this write fails.
    next?.catch(() => undefined);
    await onPage(page, fetchedAt);
  }
}
