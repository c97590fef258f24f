import type pg from 'pg';
import { MARK_CLOCK_MARGIN_MS, MARKS_LOCK_TIMEOUT_MS, marksTableOf } from './marks.ts';
import type { TableShape } from './shape.ts';
import { type Row, upsertUnlessMarked } from './upsert.ts';

/**
 * Writes rows fetched upstream at `fetchedAt` (a sweep's page, a refetch) in one transaction
 * on `client`, leaving records marked since then as they are: a proxied write may be newer
 * than the fetch (writer/marks.ts). The lock on the marks makes the check and the write one
 * step for the proxy, whose writes always write marks: it waits for writes in progress and
 * holds new ones back until the commit. (On the marks, not the table: autovacuum's lock on a
 * large table would conflict with it.) `also` runs in the same transaction.
 *
 * Returns how many rows were written and the keys held back among rows that differ from the
 * table: fetch those again once MARK_CLOCK_MARGIN_MS has passed.
 */
export async function writeFetched(
  client: pg.ClientBase,
  shape: TableShape,
  upstreamTable: string,
  rows: Row[],
  fetchedAt: number,
  also?: () => Promise<unknown>,
): Promise<{ written: number; inserted: number; held: string[] }> {
  await client.query('BEGIN');
  try {
    await client.query(`SET LOCAL lock_timeout = '${MARKS_LOCK_TIMEOUT_MS}ms'`);
    await client.query(`LOCK TABLE ${marksTableOf(shape.schema)} IN SHARE ROW EXCLUSIVE MODE`);
    const result = await upsertUnlessMarked(client, shape, rows, { table: upstreamTable, since: fetchedAt - MARK_CLOCK_MARGIN_MS });
    await also?.();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
