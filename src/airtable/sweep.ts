import type pg from 'pg';
import { ident } from '../db/sql.ts';
import type { Logger } from '../log.ts';
import { qualified } from '../writer/shape.ts';
import { upsertRows } from '../writer/upsert.ts';
import { AirtableError, type AirtableClient } from './client.ts';
import type { TableMapping } from './schema.ts';
import { rowOf, shapeOf, type TargetSchema } from './tables.ts';
import type { ListPage } from './types.ts';

export interface SweepContext {
  airtable: AirtableClient;
  db: pg.Pool;
  logger: Logger;
  /** True when a fresher copy of the record was written since `fetchedAt` (change capture, debounce). */
  skip(tableId: string, recordId: string, fetchedAt: number): boolean;
  onPage?(listed: number): Promise<void>;
  /** See CREATED_MARGIN_MS; tests with records made seconds ago set it lower. */
  createdMarginMs?: number;
}

export interface SweepResult {
  listed: number;
  written: number;
  deleted: number;
}

/**
 * Records created upstream after a listing began are not in it; their createdTime says
 * so. This margin covers the clock difference between us and upstream.
 */
const CREATED_MARGIN_MS = 60_000;
const MAX_LISTING_RESTARTS = 3;

/**
 * Lists a whole table and upserts every page. Only a listing that reached its last page
 * proves which rows are gone (DESIGN rule 2): any failure before that throws, and
 * nothing is deleted. Seen ids go to a temporary table, so memory stays flat however
 * large the table is.
 */
export async function sweepTable(
  ctx: SweepContext,
  mapping: TableMapping,
  schema: TargetSchema,
  options: { deleteMissing: boolean },
): Promise<SweepResult> {
  const shape = shapeOf(mapping, schema);
  const client = await ctx.db.connect();
  const result: SweepResult = { listed: 0, written: 0, deleted: 0 };
  try {
    await client.query('CREATE TEMP TABLE IF NOT EXISTS sweep_seen (id text PRIMARY KEY)');
    for (let restarts = 0; ; restarts++) {
      await client.query('TRUNCATE sweep_seen');
      const listingStarted = Date.now();
      try {
        await listAll(ctx, mapping, async (page, fetchedAt) => {
          const fresh = page.records.filter((r) => !ctx.skip(mapping.tableId, r.id, fetchedAt));
          result.written += await upsertRows(client, shape, fresh.map((r) => rowOf(mapping, r)));
          await client.query('INSERT INTO sweep_seen SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [page.records.map((r) => r.id)]);
          result.listed += page.records.length;
          await ctx.onPage?.(result.listed);
        });
      } catch (error) {
        // An expired iterator means "start the listing again", not "the table is broken".
        if (error instanceof AirtableError && error.kind === 'iterator' && restarts < MAX_LISTING_RESTARTS) {
          ctx.logger.info({ table: mapping.name }, 'listing iterator expired; listing the table again');
          continue;
        }
        throw error;
      }
      if (options.deleteMissing) {
        const deleted = await client.query(
          `DELETE FROM ${qualified(shape)} t
            WHERE NOT EXISTS (SELECT 1 FROM sweep_seen s WHERE s.id = t.${ident('id')})
              AND (t.created_time IS NULL OR t.created_time < $1)`,
          [new Date(listingStarted - (ctx.createdMarginMs ?? CREATED_MARGIN_MS))],
        );
        result.deleted = deleted.rowCount ?? 0;
      }
      return result;
    }
  } finally {
    await client.query('DROP TABLE IF EXISTS sweep_seen').catch(() => undefined);
    client.release();
  }
}

/** Walks the pages, fetching the next page while the current one is written. */
async function listAll(
  ctx: SweepContext,
  mapping: TableMapping,
  onPage: (page: ListPage, fetchedAt: number) => Promise<void>,
): Promise<void> {
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
