import type Router from '@koa/router';
import { z } from 'zod';
import { readJson, validate } from '../body.ts';
import { requireAdmin } from '../auth.ts';
import type { ApiOptions } from '../context.ts';
import { accountView, newAccountView } from '../views.ts';

const createAccount = z.object({ name: z.string().trim().min(1).max(200) }).strict();

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

  router.get('/api/accounts', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    ctx.body = { data: (await api.accounts.list()).map(accountView) };
  });
}
