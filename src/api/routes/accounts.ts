import type Router from '@koa/router';
import { z } from 'zod';
import { readJson, validate } from '../body.ts';
import { requireAdmin } from '../auth.ts';
import type { ApiOptions } from '../context.ts';
import { notFound } from '../../errors.ts';
import { accountLimitsView, accountView, newAccountView } from '../views.ts';

const createAccount = z.object({ name: z.string().trim().min(1).max(200) }).strict();
const limit = z.number().int().min(0).max(100_000);
const patchAccount = z
  .object({ max_syncs: limit.optional(), reader_connection_budget: limit.optional() })
  .strict()
  .refine((v) => v.max_syncs !== undefined || v.reader_connection_budget !== undefined, 'give max_syncs or reader_connection_budget');

export function accountRoutes(router: Router, api: ApiOptions): void {
  router.post('/api/accounts', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const input = validate(createAccount, await readJson(ctx, api.bodyLimit));
    const created = await api.accounts.create(input.name);
    api.logger.info({ account: created.account.id }, 'account created');
    await api.eventAccess?.accountCreated(created.account.eventsUsername, created.eventsPassword);
    ctx.status = 201;
    ctx.body = newAccountView(created.account, created.apiToken, created.eventsPassword, api.events);
  });

  router.patch('/api/accounts/:id', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const input = validate(patchAccount, await readJson(ctx, api.bodyLimit));
    const updated = await api.accounts.setLimits(ctx.params.id!, { maxSyncs: input.max_syncs, readerConnectionBudget: input.reader_connection_budget });
    if (!updated) throw notFound(`account ${ctx.params.id}`);
    api.logger.info({ account: updated.id, max_syncs: updated.maxSyncs, reader_connection_budget: updated.readerConnectionBudget }, 'account limits changed');
    ctx.body = accountLimitsView(updated);
  });

  router.get('/api/accounts', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    ctx.body = { data: (await api.accounts.list()).map(accountView) };
  });
}
