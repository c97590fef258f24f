import type { SyncRecord } from '../control/syncs.ts';
import { TributaryError } from '../errors.ts';
import { EVENT_KINDS, type EventKind, filterColumns, type WebhookFilter } from '../events/webhooks/filter.ts';
import { collectionsOf } from './collections.ts';
import type { ApiOptions } from './context.ts';
import { z } from './zod.ts';

export const MAX_FILTER_COLUMNS = 50;
export const MAX_IN_VALUES = 100;
const MAX_VALUE_LENGTH = 1000;
/** A filter is kept in the control database and shown in every listing of its webhooks: its whole size is bounded too. */
export const MAX_FILTER_BYTES = 16 * 1024;

/** A column as the database names it (PostgreSQL keeps at most 63 bytes of a name). */
const column = z.string().min(1, 'must name a column').max(63, 'must be a column name (at most 63 characters)');

const scalar = z.union([z.string().max(MAX_VALUE_LENGTH, `strings of at most ${MAX_VALUE_LENGTH} characters`), z.number(), z.boolean(), z.null()], {
  errorMap: () => ({ message: 'must be a string, number, boolean or null' }),
});

const CONDITION = 'must be a value (equals), or {"eq": value}, {"in": [value, …]} or {"not_null": true}';

const condition = z
  .union(
    [
      scalar.describe('Equals this value'),
      z.object({ eq: scalar }).strict().describe('Equals this value'),
      z
        .object({
          in: z.array(scalar).min(1, 'must list at least one value').max(MAX_IN_VALUES, `must list at most ${MAX_IN_VALUES} values`),
        })
        .strict()
        .describe('Equals one of these values'),
      z
        .object({ not_null: z.literal(true, { errorMap: () => ({ message: 'must be true (a null column is `null`)' }) }) })
        .strict()
        .describe('Is not null'),
    ],
    { errorMap: (issue, ctx) => (issue.code === z.ZodIssueCode.invalid_union ? { message: CONDITION } : { message: ctx.defaultError }) },
  )
  .describe('A condition on one column of the event\'s `data`. Values compare as JSON: the string "1" is not the number 1');

export const webhookFilterSchema = z
  .object({
    events: z
      .array(z.enum(EVENT_KINDS as unknown as [EventKind, ...EventKind[]], { errorMap: () => ({ message: `must be one of ${EVENT_KINDS.join(', ')}` }) }))
      .min(1, 'must list at least one kind')
      .max(EVENT_KINDS.length)
      .optional()
      .describe(
        'Only events of these kinds (`read`: rows sent by a backfill). A `gap` marker (docs/events.md#gaps-a-lost-replication-slot) passes every filter',
      ),
    changed: z
      .array(column)
      .min(1, 'must list at least one column')
      .max(MAX_FILTER_COLUMNS, `must list at most ${MAX_FILTER_COLUMNS} columns`)
      .optional()
      .describe('An `updated` event only when its `changes` names one of these columns; events of other kinds pass'),
    where: z
      .record(column, condition)
      .refine((where) => Object.keys(where).length > 0, 'must have at least one condition')
      .refine((where) => Object.keys(where).length <= MAX_FILTER_COLUMNS, `must have at most ${MAX_FILTER_COLUMNS} conditions`)
      .optional()
      .describe("Conditions on the event's `data` columns, all of which must hold (a column the row lacks counts as null)"),
  })
  .strict()
  .refine((filter) => filter.events || filter.changed || filter.where, 'must have events, changed or where (null removes the filter)')
  .refine((filter) => Buffer.byteLength(JSON.stringify(filter)) <= MAX_FILTER_BYTES, `must be at most ${MAX_FILTER_BYTES / 1024} KiB as JSON`)
  .describe('Only matching events are sent; the others are skipped and leave no delivery')
  .openapi('WebhookFilter');

/** The filter as stored: the kinds listed once, in their usual order. */
export function normalFilter(filter: z.infer<typeof webhookFilterSchema>): WebhookFilter {
  return {
    ...(filter.events ? { events: EVENT_KINDS.filter((kind) => filter.events!.includes(kind)) } : {}),
    ...(filter.changed ? { changed: [...new Set(filter.changed)] } : {}),
    ...(filter.where ? { where: filter.where } : {}),
  };
}

/**
 * A 400 naming the first column of the filter that is in none of the topics' collections, so
 * that a typo is refused rather than a filter that never matches. The sync's tables are read
 * only when the filter names columns.
 */
export async function checkFilterColumns(api: ApiOptions, sync: SyncRecord, topics: string[], filter: WebhookFilter | null): Promise<void> {
  const columns = filter ? filterColumns(filter) : [];
  if (columns.length === 0) return;
  let collections: Awaited<ReturnType<typeof collectionsOf>>;
  try {
    collections = await collectionsOf(api, sync);
  } catch (cause) {
    api.logger.warn({ err: cause, sync: sync.id }, 'could not read the sync database to check a webhook filter');
    throw new TributaryError('unavailable', "the sync database could not be read to check the filter's columns; try again in a moment", {
      cause,
      expose: true,
    });
  }
  const prefix = `svc.${sync.id}.`;
  const names = topics.map((topic) => topic.slice(prefix.length));
  const known = new Set(names.flatMap((name) => collections.get(name)?.columns ?? []));
  const unknown = columns.find((name) => !known.has(name));
  if (unknown !== undefined) {
    throw new TributaryError('invalid_request', `filter: column ${JSON.stringify(unknown)} is in none of the webhook's collections (${names.join(', ')})`);
  }
}
