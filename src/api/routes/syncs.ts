import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { SyncRecord } from '../../control/syncs.ts';
import { TributaryError, notFound } from '../../errors.ts';
import type { SourceKind } from '../../kinds/kind.ts';
import type { Principal } from '../auth.ts';
import { readJson, validate } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import { syncView } from '../views.ts';

const databaseUrl = z
  .string()
  .max(2048)
  .refine((value) => {
    try {
      return ['postgres:', 'postgresql:'].includes(new URL(value).protocol);
    } catch {
      return false;
    }
  }, 'must be a postgres:// or postgresql:// URL');

const common = {
  account_id: z.string().max(64).optional(),
  database_url: databaseUrl.optional(),
};

/** The create request of one kind: the common fields and the kind's own. */
function createSchema(kind: SourceKind) {
  return z
    .object({
      kind: z.literal(kind.name),
      api_key: kind.createFields.api_key,
      ...(kind.createFields.base_id ? { base_id: kind.createFields.base_id } : {}),
      settings: kind.settings.schema.partial().strict().optional(),
      ...common,
    })
    .strict();
}

/** Validates a create request against its kind's schema; an unknown kind names the known ones. */
function createInput(api: ApiOptions, body: unknown) {
  const named = z.object({ kind: z.string() }).passthrough().safeParse(body);
  const kind = named.success && api.kinds.names().includes(named.data.kind) ? api.kinds.get(named.data.kind) : undefined;
  if (!kind) throw new TributaryError('invalid_request', `kind: must be one of ${api.kinds.names().join(', ')}`);
  const input = validate(createSchema(kind), body) as { api_key: string; base_id?: string; settings?: Record<string, unknown>; account_id?: string; database_url?: string };
  return { kind, input };
}

const patchSync = z
  .object({
    settings: z.record(z.unknown()).optional(),
    /** Operator only: the reader role's CONNECTION LIMIT, within the account's budget. */
    reader_connection_limit: z.number().int().min(1).max(10_000).optional(),
  })
  .strict()
  .refine((v) => v.settings !== undefined || v.reader_connection_limit !== undefined, 'give settings or reader_connection_limit');

/** An account sees only its own syncs; anyone else's answer exactly like a missing one. */
export async function findSync(api: ApiOptions, principal: Principal, id: string): Promise<SyncRecord> {
  const sync = await api.syncs.get(id);
  if (!sync || sync.state !== 'active') throw notFound(`sync ${id}`);
  if (principal.kind === 'account' && sync.accountId !== principal.account.id) throw notFound(`sync ${id}`);
  return sync;
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

const view = async (api: ApiOptions, sync: SyncRecord) => syncView(sync, await api.syncService.readerUrl(sync), api.events);

function queryFlag(ctx: Context, name: string): boolean {
  const value = ctx.query[name];
  if (value === undefined) return false;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new TributaryError('invalid_request', `${name}: must be true or false`);
}

export function syncRoutes(router: Router, api: ApiOptions): void {
  router.post('/api/syncs', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const { kind, input } = createInput(api, await readJson(ctx, api.bodyLimit));
    const accountId = await ownerOf(api, principal, input.account_id);
    const sync = await api.syncService.create({
      accountId,
      kind: kind.name,
      baseId: input.base_id ?? null,
      apiKey: input.api_key,
      settings: input.settings ?? {},
      databaseUrl: input.database_url ?? null,
    });
    await api.eventAccess?.syncCreated(accountId, sync.id);
    ctx.status = 201;
    ctx.body = await view(api, sync);
  });

  router.get('/api/syncs', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const requested = typeof ctx.query.account_id === 'string' ? ctx.query.account_id : undefined;
    // As on create: an account token naming another account is refused, not quietly narrowed.
    if (principal.kind === 'account' && requested !== undefined && requested !== principal.account.id) {
      throw new TributaryError('forbidden', 'an account token can only list the syncs of its own account');
    }
    const filter = principal.kind === 'account' ? principal.account.id : requested;
    const syncs = await api.syncs.list(filter);
    ctx.body = { data: await Promise.all(syncs.map((sync) => view(api, sync))) };
  });

  router.get('/api/syncs/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    ctx.body = await view(api, await findSync(api, principal, ctx.params.id!));
  });

  router.patch('/api/syncs/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const input = validate(patchSync, await readJson(ctx, api.bodyLimit));
    if (input.reader_connection_limit !== undefined) {
      if (principal.kind !== 'admin') throw new TributaryError('forbidden', 'reader_connection_limit is set by the operator (admin token)');
      await api.syncService.setReaderConnectionLimit(sync, input.reader_connection_limit);
    }
    let updated = (await api.syncs.get(sync.id)) ?? sync;
    if (input.settings !== undefined) {
      updated = await api.syncService.updateSettings(updated, input.settings);
      api.logger.info({ sync: sync.id, settings: updated.settings }, 'sync settings changed');
    }
    ctx.body = await view(api, updated);
  });

  router.delete('/api/syncs/:id', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const sync = await findSync(api, principal, ctx.params.id!);
    const keepDatabase = queryFlag(ctx, 'keep_database');
    await api.syncService.delete(sync, keepDatabase);
    await api.eventAccess?.syncDeleted(sync.accountId, sync.id);
    ctx.body = { id: sync.id, deleted: true, database_kept: keepDatabase };
  });
}
