import type { SyncAttachmentLinks } from '../attachments/links.ts';
import type pg from 'pg';
import type { SyncSchemas } from '../syncdb/schemas.ts';
import { writeFetched } from '../writer/fetched.ts';
import { ensureMarks } from '../writer/marks.ts';
import { deleteRows, upsertRows } from '../writer/upsert.ts';
import type { AirtableClient } from './client.ts';
import type { TableMapping } from './schema.ts';
import { rowOf, shapeOf } from './tables.ts';

export interface FetchedById {
  /** When the fetch began. */
  fetchedAt: number;
  /** Records a proxied write may have overtaken: to be fetched again later (writer/fetched.ts). */
  held: string[];
  /** The table was deleted upstream since its changes were reported: the next cycle drops it. */
  tableGone: boolean;
}

/**
 * Fetches records by id into the table in `schema` (the sync's live or swap schema) and deletes
 * those no longer there. A rebuild's table is checked at its swap instead of here.
 */
export async function fetchIntoTable(
  ctx: { client: AirtableClient; target: pg.Pool; schemas: SyncSchemas; links?: SyncAttachmentLinks },
  mapping: TableMapping,
  schema: string,
  ids: string[],
): Promise<FetchedById> {
  const { client, target, schemas } = ctx;
  const fetchedAt = Date.now();
  let records: Awaited<ReturnType<AirtableClient['recordsById']>>;
  try {
    records = await client.recordsById(mapping.tableId, ids);
  } catch (error) {
    if (!(await client.tableGone(error, mapping.tableId))) throw error;
    return { fetchedAt, held: [], tableGone: true };
  }
  const shape = shapeOf(mapping, schema);
  const found = new Set(records.map((r) => r.id));
  const rows = records.map((r) => rowOf(mapping, r, ctx.links));
  let held: string[] = [];
  if (schema === schemas.swap) {
    await upsertRows(target, shape, rows);
  } else {
    await ensureMarks(target, schemas);
    const db = await target.connect();
    let failed = false;
    try {
      ({ held } = await writeFetched(db, shape, mapping.tableId, rows, fetchedAt));
    } catch (error) {
      failed = true; // the connection may be broken (a statement past its deadline): not back into the pool
      throw error;
    } finally {
      db.release(failed);
    }
  }
  // Gone upstream when fetched: a proxied write cannot bring a deleted record back.
  await deleteRows(
    target,
    shape,
    ids.filter((id) => !found.has(id)),
  );
  return { fetchedAt, held, tableGone: false };
}
