import type pg from 'pg';
import { AirtableClient } from '../airtable/client.ts';
import type { TableMapping } from '../airtable/schema.ts';
import { rowOf, shapeOf } from '../airtable/tables.ts';
import type { AirtableRecord } from '../airtable/types.ts';
import { inTransaction } from '../db/sql.ts';
import { toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { QuotaLimiter, QuotaRule } from '../quota/limiter.ts';
import { deleteRows, upsertRows } from '../writer/upsert.ts';
import type { SyncTarget, SyncTargets } from './targets.ts';

export interface AirtableWriteContext {
  targets: SyncTargets;
  limiter?: QuotaLimiter;
  /** Where api.airtable.com is reached, for the fetches below. */
  baseUrl: string;
  rule: QuotaRule;
  maxWaitMs: number;
  logger: Logger;
}

/** One proxied write that Airtable accepted. */
export interface AirtableWrite {
  baseId: string;
  /** The table as the path named it (name or tbl… id; after translation, the id). */
  table: string;
  method: string;
  /** The request asked for fields keyed by id (`returnFieldsByFieldId`). */
  byFieldId: boolean;
}

export interface WriteResult {
  syncs: number;
  written: number;
  deleted: number;
  fetched: boolean;
}

/** Field types Airtable computes: a write answer may lack them (not yet computed, or empty). */
const COMPUTED = new Set([
  'formula',
  'rollup',
  'multipleLookupValues',
  'count',
  'autoNumber',
  'createdTime',
  'lastModifiedTime',
  'createdBy',
  'lastModifiedBy',
  'button',
  'aiText',
  'externalSyncSource',
]);

type AnswerRecord = { id: string; createdTime?: unknown; fields: Record<string, unknown> };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The records an answer carries: written ones (create, update, upsert) or deleted ids. */
export function recordsOfAnswer(method: string, answer: unknown): { upserts: AnswerRecord[]; deletes: string[] } {
  if (!isObject(answer)) return { upserts: [], deletes: [] };
  const items = Array.isArray(answer.records) ? answer.records : [answer];
  if (method === 'DELETE') {
    return { upserts: [], deletes: items.flatMap((r) => (isObject(r) && r.deleted === true && typeof r.id === 'string' ? [r.id] : [])) };
  }
  return { upserts: items.filter((r): r is AnswerRecord => isObject(r) && typeof r.id === 'string' && isObject(r.fields)), deletes: [] };
}

/** An answer record as the sync lists records: fields keyed by field id. */
function asListed(mapping: TableMapping, record: AnswerRecord, byFieldId: boolean): AirtableRecord {
  const fields: Record<string, unknown> = {};
  for (const column of mapping.columns) {
    if (column.fieldId === null) continue;
    const value = record.fields[byFieldId ? column.fieldId : column.upstreamName];
    if (value !== undefined) fields[column.fieldId] = value;
  }
  return { id: record.id, createdTime: String(record.createdTime), fields };
}

/**
 * Whether the answer alone cannot give every column: a computed field is absent (Airtable
 * omits empty cells, and sometimes one not computed yet), the creation time is missing, or
 * a field name the table was not built with appears (a field renamed since: only its id
 * still matches, so the record is fetched by field id).
 */
function needsFetch(mapping: TableMapping, records: AnswerRecord[], byFieldId: boolean): boolean {
  const known = new Set(mapping.columns.flatMap((c) => (c.fieldId === null ? [] : [byFieldId ? c.fieldId : c.upstreamName])));
  const computed = mapping.columns.filter((c) => c.fieldId !== null && COMPUTED.has(c.upstreamType));
  return records.some(
    (record) =>
      typeof record.createdTime !== 'string' ||
      computed.some((c) => record.fields[byFieldId ? c.fieldId! : c.upstreamName] === undefined) ||
      (!byFieldId && Object.keys(record.fields).some((name) => !known.has(name))),
  );
}

const MAPPING_SQL = `SELECT mapping FROM public_swap._tables
  WHERE upstream_id NOT LIKE 'stripe:%' AND (upstream_id = $1 OR mapping->>'upstreamName' = $1)
  ORDER BY upstream_id = $1 DESC LIMIT 1`;

/** The mapping the sync database's table was built with, or undefined when the table is not built (yet). */
async function mappingOf(db: pg.Pool | pg.ClientBase, table: string, lock = false): Promise<TableMapping | undefined> {
  const { rows } = await db.query<{ mapping: TableMapping }>(lock ? `${MAPPING_SQL} FOR SHARE` : MAPPING_SQL, [table]);
  return rows[0]?.mapping;
}

/** Current versions of the records, fields keyed by id, through the shared quota as a client request. */
async function fetchRecords(ctx: AirtableWriteContext, target: SyncTarget, write: AirtableWrite, tableId: string, ids: string[]) {
  const client = new AirtableClient({
    baseUrl: ctx.baseUrl,
    // The sync's own key: it is known to read the base, whatever scopes the client's token has.
    token: await target.key(),
    baseId: write.baseId,
    limiter: ctx.limiter,
    quota: { kind: 'client', maxWaitMs: ctx.maxWaitMs },
    rule: ctx.rule,
    attempts: 1,
    timeoutMs: 15_000,
  });
  return new Map((await client.recordsById(tableId, ids)).map((r) => [r.id, r]));
}

/**
 * Writes what a successful Airtable write changed into every active sync of the base,
 * before the client gets its answer: the records of the answer converted exactly as the
 * sync converts listed records (its stored mapping, so lookup_as and intelligent_cast as
 * built), fetched again by id when the answer cannot give every column, or deleted.
 * Each sync's write holds its table's mapping row (FOR SHARE) so a rebuild's swap waits
 * for it rather than the write landing in a table of another shape.
 */
export async function writeThroughAirtable(ctx: AirtableWriteContext, write: AirtableWrite, answer: unknown): Promise<WriteResult> {
  const result: WriteResult = { syncs: 0, written: 0, deleted: 0, fetched: false };
  const { upserts, deletes } = recordsOfAnswer(write.method, answer);
  if (upserts.length === 0 && deletes.length === 0) return result;
  const targets = await ctx.targets.airtable(write.baseId);
  if (targets.length === 0) return result;

  let fetched: Map<string, AirtableRecord> | undefined;
  if (upserts.length > 0) {
    const mappings = await Promise.all(targets.map((t) => mappingOf(t.pool, write.table)));
    const index = mappings.findIndex((m) => m !== undefined && needsFetch(m, upserts, write.byFieldId));
    if (index >= 0) {
      try {
        fetched = await fetchRecords(ctx, targets[index]!, write, mappings[index]!.tableId, upserts.map((r) => r.id));
        result.fetched = true;
      } catch (error) {
        // The answer is still the best there is; the sync's change capture completes it.
        ctx.logger.warn({ base: write.baseId, error: toError(error).message }, 'fetching written records for their computed fields failed; writing the answer as it came');
      }
    }
  }

  const written = await Promise.all(
    targets.map((target) =>
      inTransaction(
        target.pool,
        async (tx) => {
          const mapping = await mappingOf(tx, write.table, true);
          if (!mapping) return { written: 0, deleted: 0 };
          const shape = shapeOf(mapping, 'public');
          const rows = upserts.map((r) => rowOf(mapping, fetched?.get(r.id) ?? asListed(mapping, r, write.byFieldId)));
          return { written: await upsertRows(tx, shape, rows), deleted: await deleteRows(tx, shape, deletes) };
        },
        ["lock_timeout = '5s'", "statement_timeout = '15s'"],
      ),
    ),
  );
  result.syncs = targets.length;
  for (const w of written) {
    result.written += w.written;
    result.deleted += w.deleted;
  }
  return result;
}
