import type Router from '@koa/router';
import { readJson, validate } from '../body.ts';
import { requireAdmin } from '../auth.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { notFound } from '../../errors.ts';
import { accountAnswer, accountLimitsAnswer, accountLimitsView, accountView, newAccountAnswer, newAccountView } from '../views.ts';
import { z } from '../zod.ts';

const createAccount = z
  .object({ name: z.string().trim().min(1).max(200) })
  .strict()
  .openapi('CreateAccount');
const limit = z.number().int().min(0).max(100_000);
const LIMIT_FIELDS = ['max_syncs', 'reader_connection_budget', 'max_consumer_groups', 'max_group_members', 'max_webhooks'];
const patchAccount = z
  .object({
    max_syncs: limit.optional().describe('Syncs the account may have'),
    reader_connection_budget: limit.optional().describe("Connections all the account's read-only roles may hold together"),
    max_consumer_groups: limit.optional().describe('Consumer groups of the event REST interface the account may keep'),
    max_group_members: limit.optional().describe('Live instances per consumer group'),
    max_webhooks: limit.optional().describe("Webhooks of all the account's syncs together"),
  })
  .strict()
  .refine((v) => Object.values(v).some((value) => value !== undefined), `give at least one of ${LIMIT_FIELDS.join(', ')}`)
  .openapi('PatchAccount', { description: 'At least one limit' });
const accountParams = z.object({ id: z.string().describe('`acc_…`') });

export function accountRoutes(router: Router, api: ApiOptions, doc: ApiDocument): void {
  doc.route({
    method: 'post',
    path: '/api/accounts',
    operationId: 'createAccount',
    tag: 'accounts',
    summary: 'Create an account',
    description: "Answers the account's API token and event password: this answer is the only one that shows them.",
    access: 'admin',
    body: { schema: createAccount },
    answers: { 201: { description: 'The account, its token and its event credentials', schema: newAccountAnswer } },
  });
  router.post('/api/accounts', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const input = validate(createAccount, await readJson(ctx, api.bodyLimit));
    const created = await api.accounts.create(input.name);
    api.logger.info({ account: created.account.id }, 'account created');
    await api.eventAccess?.accountCreated(created.account.eventsUsername, created.eventsPassword);
    ctx.status = 201;
    ctx.body = newAccountView(created.account, created.apiToken, created.eventsPassword, api.events);
  });

  doc.route({
    method: 'patch',
    path: '/api/accounts/:id',
    operationId: 'setAccountLimits',
    tag: 'accounts',
    summary: "Change an account's limits",
    access: 'admin',
    params: accountParams,
    body: { schema: patchAccount },
    answers: { 200: { description: 'The account with its limits', schema: accountLimitsAnswer } },
    errors: { 404: 'No such account' },
  });
  router.patch('/api/accounts/:id', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const input = validate(patchAccount, await readJson(ctx, api.bodyLimit));
    const updated = await api.accounts.setLimits(ctx.params.id!, {
      maxSyncs: input.max_syncs,
      readerConnectionBudget: input.reader_connection_budget,
      maxConsumerGroups: input.max_consumer_groups,
      maxGroupMembers: input.max_group_members,
      maxWebhooks: input.max_webhooks,
    });
    if (!updated) throw notFound(`account ${ctx.params.id}`);
    const view = accountLimitsView(updated);
    api.logger.info({ account: updated.id, ...view.limits }, 'account limits changed');
    ctx.body = view;
  });

  doc.route({
    method: 'get',
    path: '/api/accounts',
    operationId: 'listAccounts',
    tag: 'accounts',
    summary: 'List the accounts',
    access: 'admin',
    answers: { 200: { description: 'Every account', schema: z.object({ data: z.array(accountAnswer) }).strict() } },
  });
  router.get('/api/accounts', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    ctx.body = { data: (await api.accounts.list()).map(accountView) };
  });
}
