import type { TokenOwners } from '../owners.ts';
import { AirtableClient } from '../client.ts';
import type { TableMapping } from '../schema.ts';
import { rowOf, shapeOf } from '../tables.ts';
import type { AirtableRecord } from '../types.ts';
import { toError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { QuotaLimiter, QuotaRule } from '../../quota/limiter.ts';
import { ensureMarks } from '../../writer/marks.ts';
import { deleteRows, upsertRows } from '../../writer/upsert.ts';
import type { WriteResult } from '../../proxy/plan.ts';
import type { SyncTarget } from '../../proxy/targets.ts';
import { bookkeeping, type SyncSchemas } from '../../syncdb/schemas.ts';

export interface AirtableWriteContext {
  /** The syncs of the written base. */
  targets(): Promise<SyncTarget[]>;
  limiter?: QuotaLimiter;
  /** The users of the syncs' tokens, whose quota the fetches below count against. */
  owners?: TokenOwners;
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

const mappingSql = (schemas: SyncSchemas) => `SELECT mapping FROM ${bookkeeping(schemas, '_tables')}
  WHERE upstream_id NOT LIKE 'stripe:%' AND (upstream_id = $1 OR mapping->>'upstreamName' = $1)
  ORDER BY upstream_id = $1 DESC LIMIT 1`;

/** How long a table's mapping is used without asking again; a write that fails asks at once. */
const MAPPING_TTL_MS = 5_000;
const mappings = new WeakMap<SyncTarget, Map<string, { mapping: TableMapping | undefined; until: number }>>();

/** The mapping the sync database's table was built with, or undefined when the table is not built (yet). */
async function mappingOf(target: SyncTarget, table: string, fresh = false): Promise<TableMapping | undefined> {
  let known = mappings.get(target);
  if (!known) mappings.set(target, (known = new Map()));
  const hit = known.get(table);
  if (!fresh && hit && hit.until > Date.now()) return hit.mapping;
  const { rows } = await target.pool.query<{ mapping: TableMapping }>(mappingSql(target.schemas), [table]);
  known.set(table, { mapping: rows[0]?.mapping, until: Date.now() + MAPPING_TTL_MS });
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
    owners: ctx.owners,
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
 */
export async function writeThroughAirtable(ctx: AirtableWriteContext, write: AirtableWrite, answer: unknown): Promise<WriteResult> {
  const result: WriteResult = { syncs: 0, written: 0, deleted: 0, fetched: false };
  const { upserts, deletes } = recordsOfAnswer(write.method, answer);
  if (upserts.length === 0 && deletes.length === 0) return result;
  const targets = await ctx.targets();
  if (targets.length === 0) return result;

  // First from the answer alone; a sync whose mapping says the answer is not enough writes
  // nothing yet, and is written again once the records have been fetched (outside any transaction).
  const first = await Promise.all(targets.map((target) => writeOne(target, write, upserts, deletes, undefined)));
  const incomplete = first.flatMap((outcome, i) => (outcome === 'incomplete' ? [i] : []));
  let second: Array<Written | 'incomplete'> = [];
  if (incomplete.length > 0) {
    const index = incomplete[0]!;
    let fetched: Map<string, AirtableRecord> | undefined;
    try {
      const tableId = (await mappingOf(targets[index]!, write.table))?.tableId ?? write.table;
      fetched = await fetchRecords(
        ctx,
        targets[index]!,
        write,
        tableId,
        upserts.map((r) => r.id),
      );
      result.fetched = true;
    } catch (error) {
      // The answer is still the best there is; the sync's change capture completes it.
      ctx.logger.warn(
        { base: write.baseId, error: toError(error).message },
        'fetching written records for their computed fields failed; writing the answer as it came',
      );
    }
    second = await Promise.all(incomplete.map((i) => writeOne(targets[i]!, write, upserts, deletes, fetched ?? new Map())));
  }
  result.syncs = targets.length;
  for (const w of [...first, ...second]) {
    if (w === 'incomplete') continue;
    result.written += w.written;
    result.deleted += w.deleted;
  }
  return result;
}

type Written = { written: number; deleted: number };

/**
 * One sync's write: one statement (the writer's upsert that skips unchanged rows, or its
 * delete), no transaction. It marks the records too, so that a sweep page fetched before
 * this write cannot put their older copy back (writer/marks.ts). The mapping may be a few seconds old: if a rebuild swapped the
 * table meanwhile and the statement no longer fits it, the mapping is read again and the
 * write retried once; a write that fits the new table is right as it is (same columns).
 * `fetched` undefined: the answer alone, or 'incomplete' when it cannot give every column.
 */
async function writeOne(
  target: SyncTarget,
  write: AirtableWrite,
  upserts: AnswerRecord[],
  deletes: string[],
  fetched: Map<string, AirtableRecord> | undefined,
): Promise<Written | 'incomplete'> {
  for (let attempt = 0; ; attempt++) {
    const mapping = await mappingOf(target, write.table, attempt > 0);
    if (!mapping) return { written: 0, deleted: 0 };
    if (fetched === undefined && upserts.length > 0 && needsFetch(mapping, upserts, write.byFieldId)) return 'incomplete';
    const shape = shapeOf(mapping, target.schemas.live);
    await ensureMarks(target.pool, target.schemas);
    try {
      const rows = upserts.map((r) => rowOf(mapping, fetched?.get(r.id) ?? asListed(mapping, r, write.byFieldId), target.links));
      const mark = { table: mapping.tableId, at: Date.now() };
      return { written: await upsertRows(target.pool, shape, rows, { mark }), deleted: await deleteRows(target.pool, shape, deletes, { mark }) };
    } catch (error) {
      if (attempt > 0) throw error;
    }
  }
}
