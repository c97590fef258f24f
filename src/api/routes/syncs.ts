import type Router from '@koa/router';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, notFound, toError } from '../../errors.ts';
import type { SourceKind } from '../../kinds/kind.ts';
import type { Principal } from '../auth.ts';
import { queryErrors, readJson, validate, validateQuery } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { CAPPED } from '../tenancy.ts';
import { kindComponent, oneOf, syncAnswer, syncView } from '../views.ts';
import { deliveriesBehind } from '../../control/delivery-lag.ts';
import { z } from '../zod.ts';
import { settingsOnly } from '../../kinds/kind.ts';
import { regionSchema } from './servers.ts';
import { MAX_SCHEMA_LENGTH } from '../../syncdb/schemas.ts';

const databaseUrl = z
  .string()
  .max(2048)
  .refine((value) => {
    try {
      return ['postgres:', 'postgresql:'].includes(new URL(value).protocol);
    } catch {
      return false;
    }
  }, 'must be a postgres:// or postgresql:// URL')
  .describe("A customer-owned PostgreSQL server (`postgres://user:password@host:5432/postgres`) to create the sync's database on, instead of the shared one");

const common = {
  account_id: z
    .string()
    .max(64)
    .optional()
    .describe('Required with the operator token: the account the sync belongs to. An account token may name only its own'),
  database_url: databaseUrl.optional(),
  region: regionSchema
    .optional()
    .describe(
      "The region of the pool server to hold the sync's database (default: the deployment's default region, `TRIBUTARY_DEFAULT_REGION`). Not with `database_url`",
    ),
  database_of: z
    .string()
    .max(64)
    .optional()
    .describe(
      "Operator token only: another sync of the same account whose database this sync's tables go into, in schema `schema`, read with that sync's reader. Not with `database_url` or `region`",
    ),
  schema: z
    .string()
    .max(128)
    .optional()
    .describe(
      `With \`database_of\`: the new sync's schema in that database; lower-case letters, digits and underscores, a letter first, at most ${MAX_SCHEMA_LENGTH} characters; not \`public\`, \`information_schema\`, \`pg_…\` or \`…_swap\`, nor a schema the database has`,
    ),
};

/** The reader's limits (reader-limits.ts), operator token only; each applies to the reader's new connections. */
const readerLimitFields = {
  reader_statement_timeout_ms: z
    .number()
    .int()
    .min(0)
    .max(86_400_000)
    .optional()
    .describe("Operator token only: the read-only role's statement_timeout in ms (0: none)"),
  reader_idle_in_transaction_timeout_ms: z
    .number()
    .int()
    .min(0)
    .max(86_400_000)
    .optional()
    .describe("Operator token only: the read-only role's idle_in_transaction_session_timeout in ms (0: none)"),
  reader_temp_file_limit_mb: z
    .number()
    .int()
    .min(1)
    .max(1_048_576)
    .optional()
    .describe("Operator token only: the read-only role's temp_file_limit in MB, per server process"),
};
const readerLimitNames = Object.keys(readerLimitFields).join(', ');

/**
 * The request schemas of one kind: the common fields and the kind's own (its key, the
 * upstream object it syncs, its settings), as the kind registry gives them.
 */
function kindSchemas(kind: SourceKind) {
  const defaults = Object.entries(kind.settings.defaults).map(([name, value]) => `${name} ${JSON.stringify(value)}`);
  const settings = kind.settings.schema
    .partial()
    .strict(settingsOnly(kind))
    .openapi(kindComponent(kind, 'SettingsInput'), { description: `Settings to change; the others keep their values (defaults: ${defaults.join(', ')})` });
  return {
    create: z
      .object({
        kind: z.literal(kind.name),
        api_key: kind.createFields.api_key,
        ...(kind.createFields.base_id ? { base_id: kind.createFields.base_id } : {}),
        settings: settings.optional(),
        ...common,
      })
      .strict()
      .openapi(`Create${kindComponent(kind, 'Sync')}`),
    patch: z
      .object({
        settings: settings.optional(),
        reader_connection_limit: z
          .number()
          .int()
          .min(1)
          .max(10_000)
          .optional()
          .describe("Operator token only: the read-only role's connection limit, within the account's budget"),
        ...readerLimitFields,
      })
      .strict()
      .refine((v) => Object.values(v).some((value) => value !== undefined), `give settings, reader_connection_limit or ${readerLimitNames}`)
      .openapi(`Patch${kindComponent(kind, 'Sync')}`, { description: "At least one field; settings as the sync's kind takes them" }),
  };
}

type KindSchemas = ReturnType<typeof kindSchemas>;

/** A create request is one kind's; an unknown kind names the known ones. */
function createSchema(schemas: Map<string, KindSchemas>) {
  const names = [...schemas.keys()].join(', ');
  const options = [...schemas.values()].map((kind) => kind.create);
  return z.discriminatedUnion('kind', options as [(typeof options)[number], ...typeof options], {
    errorMap: (issue, ctx) => ({ message: issue.code === z.ZodIssueCode.invalid_union_discriminator ? `must be one of ${names}` : ctx.defaultError }),
  });
}

/** The fields every kind's create request has (TypeScript cannot see them through the union). */
interface CreateInput {
  kind: string;
  api_key: string;
  base_id?: string;
  settings?: Record<string, unknown>;
  account_id?: string;
  database_url?: string;
  region?: string;
  database_of?: string;
  schema?: string;
}

export const syncParams = z.object({ id: z.string().describe('The sync (`syn_…`)') });

const listQuery = z.object({
  account_id: z
    .string({ errorMap: queryErrors('must be an account id') })
    .optional()
    .describe("Operator token: only this account's syncs. An account token may name only its own"),
});

const deleteQuery = z.object({
  keep_database: z
    .enum(['true', '1', 'false', '0'], { errorMap: queryErrors('must be true or false') })
    .transform((flag) => flag === 'true' || flag === '1')
    .optional()
    .describe("Keep the sync's database (and its read-only role) instead of dropping it"),
});

export const SYNC_NOT_FOUND = "No such sync, or another account's";

/** An account sees only its own syncs; anyone else's answer exactly like a missing one. */
export async function findSync(api: ApiOptions, principal: Principal, id: string): Promise<SyncRecord> {
  const sync = await api.syncs.get(id);
  if (sync?.state !== 'active') throw notFound(`sync ${id}`);
  if (principal.kind === 'account' && sync.accountId !== principal.account.id) throw notFound(`sync ${id}`);
  return sync;
}

/** A 403 `waiting_list` when the kind is behind a waiting list that has not admitted the account (it is on it now). */
async function admitted(api: ApiOptions, accountId: string, kind: string): Promise<void> {
  const answer = await api.waitingList!.askToCreate(accountId, kind);
  if (answer.admitted) return;
  api.logger.info({ account: accountId, kind }, 'account on the waiting list');
  throw new TributaryError(
    'waiting_list',
    `${kind} syncs are in a closed beta with a waiting list: this account is on it since ${answer.entry.askedAt.toISOString()}, and can create them once the operator admits it`,
  );
}

async function ownerOf(api: ApiOptions, principal: Principal, requested: string | undefined): Promise<string> {
  if (principal.kind === 'account') {
    if (requested !== undefined && requested !== principal.account.id) {
      throw new TributaryError('forbidden', 'an account token can only create syncs in its own account');
    }
    return principal.account.id;
  }
  if (requested === undefined) throw new TributaryError('invalid_request', 'account_id: required with the admin token');
  if (!(await api.accounts.get(requested))) throw new TributaryError('unprocessable', `account ${requested} does not exist`);
  return requested;
}

/** The syncs' answers, with how far their delivery paths are behind (read for all of them at once). */
const views = async (api: ApiOptions, syncs: SyncRecord[]) => {
  // Not read (a statement that failed), the deliveries' part is left out, not the whole answer.
  const behind = await deliveriesBehind(
    api.pool,
    syncs.map((sync) => sync.id),
    { kafka: api.events.kafkaBrokers.length > 0 },
  ).catch((err: unknown) => {
    api.logger.warn({ err: toError(err) }, 'could not read how far the delivery paths are behind');
    return undefined;
  });
  return Promise.all(
    syncs.map(async (sync) => {
      // A sync in another's database reads through that sync's reader: its limits are the ones shown.
      const reader = sync.databaseOf === null ? sync : ((await api.syncs.get(sync.databaseOf)) ?? sync);
      const withDeliveries = { ...sync, status: { ...sync.status, deliveries: behind && (behind.get(sync.id) ?? null) } };
      return syncView(withDeliveries, await api.syncService.readerUrl(sync), api.events, reader, api.statusBounds);
    }),
  );
};
const view = async (api: ApiOptions, sync: SyncRecord) => (await views(api, [sync]))[0]!;

/** `database_of` and `schema` go together, operator token only, with no other placement. */
function checkShared(input: CreateInput, principal: Principal): void {
  if (input.database_of === undefined) {
    if (input.schema !== undefined) throw new TributaryError('invalid_request', 'schema: only with database_of (a sync made alone has schema public)');
    return;
  }
  if (principal.kind !== 'admin') throw new TributaryError('forbidden', 'database_of: set by the operator (admin token)');
  if (input.schema === undefined) throw new TributaryError('invalid_request', 'schema: required with database_of');
  if (input.database_url !== undefined || input.region !== undefined) {
    throw new TributaryError(
      'invalid_request',
      `${input.database_url !== undefined ? 'database_url' : 'region'}: a sync made with database_of goes where that sync's database is`,
    );
  }
}

export function syncRoutes(router: Router, api: ApiOptions, doc: ApiDocument): void {
  // Each kind's schemas are made once: create and patch share its settings schema (one component).
  const schemas = new Map(api.kinds.names().map((name) => [name, kindSchemas(api.kinds.get(name))]));
  const createSync = createSchema(schemas);
  const patchSync = new Map([...schemas].map(([name, kind]) => [name, kind.patch]));
  const sync = syncAnswer(api.kinds);
  const syncList = z.object({ data: z.array(sync) }).strict();

  doc.route({
    method: 'post',
    path: '/api/syncs',
    operationId: 'createSync',
    tag: 'syncs',
    summary: 'Create a sync',
    description:
      "Checks the key upstream, creates the sync's database and read-only role, and starts syncing. The database goes to the server of the sync's `region` with the most room that is not draining, or to the customer's own server (`database_url`). With `database_of` (operator token), the sync's tables go into schema `schema` of that sync's database instead, read with its reader. An account syncs an upstream (an Airtable base, a Stripe account) once.",
    access: 'token',
    body: { schema: createSync },
    answers: { 201: { description: 'The sync; `database.url` connects as its read-only role', schema: sync } },
    errors: {
      400: '`account_id` is missing with the operator token, `database_url` is not usable as given, `region` is given with `database_url`, or `schema` without `database_of` (or the other way round, or with `database_url` or `region`)',
      403: 'An account token naming another account in `account_id`, or giving `database_of`; or (code `waiting_list`) the kind is behind a waiting list that has not admitted the account, which is on it from then on (docs/management-api.md#waiting-lists)',
      409: "The account already syncs this upstream (the message names that sync), has as many syncs as its limit, or its readers hold its whole connection budget; or `schema` is taken in that sync's database (the message names it)",
      422: 'The upstream refused the key or it cannot read what a sync needs; `account_id` names no account; `region` has no server, or none of its servers has room (the message names the region); `database_url` cannot be reached, is on a loopback, private or link-local address, or cannot host a sync database; `database_of` names no sync of the account, or a kind that cannot share a database; or `schema` is not a valid name or is reserved (the message names it)',
      429: '`database_url`: too many servers checked this minute',
      503: 'The upstream could not be reached to check the key, or the database could not be created',
    },
  });
  router.post('/api/syncs', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const input = validate(createSync, await readJson(ctx, api.bodyLimit)) as CreateInput;
    if (input.region !== undefined && input.database_url !== undefined) {
      throw new TributaryError('invalid_request', 'region: a customer-owned server (database_url) has no region; give one or the other');
    }
    checkShared(input, principal);
    const accountId = await ownerOf(api, principal, input.account_id);
    // A kind behind a waiting list (the closed beta): an account not admitted is put on it.
    if (principal.kind === 'account') await admitted(api, accountId, input.kind);
    const sync = await api.syncService.create({
      accountId,
      kind: input.kind,
      baseId: input.base_id ?? null,
      apiKey: input.api_key,
      settings: input.settings ?? {},
      databaseUrl: input.database_url ?? null,
      region: input.region ?? null,
      databaseOf: input.database_of ?? null,
      schema: input.schema ?? null,
    });
    await api.eventAccess?.syncCreated(accountId, sync.id);
    ctx.status = 201;
    ctx.body = await view(api, sync);
  });

  doc.route({
    method: 'get',
    path: '/api/syncs',
    operationId: 'listSyncs',
    tag: 'syncs',
    summary: 'List syncs',
    description: "An account token lists its account's syncs; the operator token every account's, or one account's with `account_id`.",
    access: 'token',
    query: listQuery,
    answers: { 200: { description: 'The syncs', schema: syncList } },
    errors: { 403: 'An account token naming another account in `account_id`', 429: CAPPED.reads },
  });
  router.get('/api/syncs', async (ctx) => {
    const principal = await api.authenticate(ctx, { capped: 'reads' });
    const requested = validateQuery(listQuery, ctx).account_id;
    // As on create: an account token naming another account is refused, not quietly narrowed.
    if (principal.kind === 'account' && requested !== undefined && requested !== principal.account.id) {
      throw new TributaryError('forbidden', 'an account token can only list the syncs of its own account');
    }
    const filter = principal.kind === 'account' ? principal.account.id : requested;
    const syncs = await api.syncs.list(filter);
    ctx.body = { data: await views(api, syncs) };
  });

  doc.route({
    method: 'get',
    path: '/api/syncs/:id',
    operationId: 'getSync',
    tag: 'syncs',
    summary: 'Show a sync with its status',
    access: 'token',
    params: syncParams,
    answers: { 200: { description: 'The sync', schema: sync } },
    errors: { 404: SYNC_NOT_FOUND },
  });
  router.get('/api/syncs/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    ctx.body = await view(api, await findSync(api, principal, ctx.params.id!));
  });

  doc.route({
    method: 'patch',
    path: '/api/syncs/:id',
    operationId: 'updateSync',
    tag: 'syncs',
    summary: "Change a sync's settings or its reader's limits",
    description: 'Settings apply from the next cycle; those not given keep their values.',
    access: 'token',
    params: syncParams,
    body: { schema: oneOf([...patchSync.values()]) },
    answers: { 200: { description: 'The sync as changed', schema: sync } },
    errors: {
      400: "A setting the sync's kind does not take",
      403: '`reader_connection_limit` or a reader limit with an account token',
      404: SYNC_NOT_FOUND,
      409: "`reader_connection_limit` beyond what the account's budget leaves, or the sync is being created or deleted",
    },
  });
  router.patch('/api/syncs/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const schema = patchSync.get(sync.kind);
    if (!schema) throw new Error(`no kind ${sync.kind} is registered`);
    const input = validate(schema, await readJson(ctx, api.bodyLimit));
    const limits = {
      statementTimeoutMs: input.reader_statement_timeout_ms,
      idleInTransactionTimeoutMs: input.reader_idle_in_transaction_timeout_ms,
      tempFileLimitMb: input.reader_temp_file_limit_mb,
    };
    const limitsGiven = Object.values(limits).some((value) => value !== undefined);
    if ((input.reader_connection_limit !== undefined || limitsGiven) && principal.kind !== 'admin') {
      const names = input.reader_connection_limit !== undefined ? 'reader_connection_limit' : readerLimitNames;
      throw new TributaryError('forbidden', `${names}: set by the operator (admin token)`);
    }
    if (input.reader_connection_limit !== undefined) await api.syncService.setReaderConnectionLimit(sync, input.reader_connection_limit);
    if (limitsGiven) await api.syncService.setReaderLimits(sync, limits);
    let updated = (await api.syncs.get(sync.id)) ?? sync;
    if (input.settings !== undefined) {
      updated = await api.syncService.updateSettings(updated, input.settings);
      api.logger.info({ sync: sync.id, settings: updated.settings }, 'sync settings changed');
    }
    ctx.body = await view(api, updated);
  });

  doc.route({
    method: 'delete',
    path: '/api/syncs/:id',
    operationId: 'deleteSync',
    tag: 'syncs',
    summary: 'Delete a sync',
    description:
      'Stops the sync and drops its database and read-only role, unless `keep_database` is true. A sync made with `database_of` drops only its schemas (`keep_database`: its tables stay, unsynced); the sync whose database others share is refused until they are deleted.',
    access: 'token',
    params: syncParams,
    query: deleteQuery,
    answers: {
      200: {
        description: 'The sync is gone',
        schema: z.object({ id: z.string(), deleted: z.literal(true), database_kept: z.boolean() }).strict(),
      },
    },
    errors: { 404: SYNC_NOT_FOUND, 409: "Other syncs still have their tables in this sync's database (the message names them)" },
  });
  router.delete('/api/syncs/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const keepDatabase = validateQuery(deleteQuery, ctx).keep_database ?? false;
    await api.syncService.delete(sync, keepDatabase);
    await api.eventAccess?.syncDeleted(sync.accountId, sync.id);
    ctx.body = { id: sync.id, deleted: true, database_kept: keepDatabase };
  });
}
