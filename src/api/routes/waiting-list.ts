import type Router from '@koa/router';
import { notFound, TributaryError } from '../../errors.ts';
import type { WaitingList, WaitingListEntry } from '../../control/waiting-list.ts';
import { requireAdmin } from '../auth.ts';
import { readJson, validate, validateQuery } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { time } from '../views.ts';
import { z } from '../zod.ts';

const kind = z.string().min(1).max(63).describe('A kind of sync (`airtable`, `stripe`, …)');

export const waitingListEntryAnswer = z
  .object({
    account_id: z.string(),
    account_name: z.string(),
    kind: z.string(),
    state: z.enum(['waiting', 'admitted']),
    asked_at: time.describe('When the account first asked (or was admitted, if it never asked)'),
    admitted_at: time.nullable(),
  })
  .strict()
  .openapi('WaitingListEntry');

const listAnswer = z
  .object({
    kinds: z.array(z.string()).describe('The kinds of sync behind a waiting list (TRIBUTARY_WAITING_LIST_KINDS); every other kind is open'),
    data: z.array(waitingListEntryAnswer).describe("The entries, oldest ask first: every account's for the operator token, its own for an account token"),
  })
  .strict()
  .openapi('WaitingList');

const listQuery = z
  .object({
    kind: kind.optional().describe('Only this kind'),
    state: z.enum(['waiting', 'admitted']).optional().describe('Only waiting, or only admitted, accounts'),
    account_id: z.string().max(100).optional().describe('Only this account (operator token)'),
  })
  .strict();

const joinBody = z.object({ kind }).strict().openapi('JoinWaitingList');
const entryParams = z.object({ kind, account_id: z.string().max(100).describe('`acc_…`') });

export function entryView(entry: WaitingListEntry): z.infer<typeof waitingListEntryAnswer> {
  return {
    account_id: entry.accountId,
    account_name: entry.accountName,
    kind: entry.kind,
    state: entry.admittedAt ? 'admitted' : 'waiting',
    asked_at: entry.askedAt.toISOString(),
    admitted_at: entry.admittedAt?.toISOString() ?? null,
  };
}

/** A kind the operator did not put behind a list has none: its entries would mean nothing. */
function listedKind(list: WaitingList, name: string): string {
  if (!list.listed(name)) {
    const listed = list.kinds.length > 0 ? `(the listed kinds: ${list.kinds.join(', ')})` : '(no kind is: every kind is open)';
    throw new TributaryError('invalid_request', `kind: ${name} has no waiting list ${listed}`);
  }
  return name;
}

/** The waiting lists (docs/management-api.md#waiting-lists): accounts see and join theirs; the operator admits and removes. */
export function waitingListRoutes(router: Router, api: ApiOptions, doc: ApiDocument): void {
  // createApiApp always sets it (none listed when not given).
  const list = api.waitingList!;
  doc.route({
    method: 'get',
    path: '/api/waiting-list',
    operationId: 'listWaitingList',
    tag: 'accounts',
    summary: 'The waiting lists',
    description: "Which kinds of sync are behind a waiting list, and the entries: every account's for the operator, an account's own for its token.",
    access: 'token',
    query: listQuery,
    answers: { 200: { description: 'The listed kinds and the entries', schema: listAnswer } },
  });
  router.get('/api/waiting-list', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const query = validateQuery(listQuery, ctx);
    if (principal.kind === 'account' && query.account_id !== undefined && query.account_id !== principal.account.id) {
      throw new TributaryError('forbidden', 'account_id: an account token sees only its own entries');
    }
    const accountId = principal.kind === 'account' ? principal.account.id : query.account_id;
    const entries = await list.list({ kind: query.kind, state: query.state, accountId });
    ctx.body = { kinds: [...list.kinds], data: entries.map(entryView) };
  });

  doc.route({
    method: 'post',
    path: '/api/waiting-list',
    operationId: 'joinWaitingList',
    tag: 'accounts',
    summary: 'Join a waiting list',
    description:
      "Puts the token's account on the kind's waiting list (asking again keeps its place). Trying to create a sync of the kind does the same, answering 403 `waiting_list`.",
    access: 'token',
    body: { schema: joinBody },
    answers: { 200: { description: "The account's entry: waiting, or admitted already", schema: waitingListEntryAnswer } },
    errors: { 403: 'The operator token has no account to put on a list' },
  });
  router.post('/api/waiting-list', async (ctx) => {
    const principal = await api.authenticate(ctx);
    const input = validate(joinBody, await readJson(ctx, api.bodyLimit));
    if (principal.kind !== 'account')
      throw new TributaryError(
        'forbidden',
        'an account joins a waiting list with its own token; the operator admits (POST /api/waiting-list/:kind/:account_id/admit)',
      );
    const entry = await list.join(principal.account.id, listedKind(list, input.kind));
    api.logger.info({ account: entry.accountId, kind: entry.kind }, 'account on the waiting list');
    ctx.body = entryView(entry);
  });

  doc.route({
    method: 'post',
    path: '/api/waiting-list/:kind/:account_id/admit',
    operationId: 'admitFromWaitingList',
    tag: 'accounts',
    summary: 'Admit an account',
    description: 'The account may create syncs of the kind from now on, whether it was waiting or not.',
    access: 'admin',
    params: entryParams,
    answers: { 200: { description: 'Its entry, admitted', schema: waitingListEntryAnswer } },
    errors: { 404: 'No such account' },
  });
  router.post('/api/waiting-list/:kind/:account_id/admit', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const { kind: name, account_id: accountId } = validate(entryParams, ctx.params, 'path');
    const entry = await list.admitByOperator(accountId, listedKind(list, name));
    if (!entry) throw notFound(`account ${accountId}`);
    api.logger.info({ account: accountId, kind: name }, 'account admitted from the waiting list');
    ctx.body = entryView(entry);
  });

  doc.route({
    method: 'delete',
    path: '/api/waiting-list/:kind/:account_id',
    operationId: 'removeFromWaitingList',
    tag: 'accounts',
    summary: 'Take an account off a waiting list',
    description:
      'Waiting or admitted, the entry goes: the account can no longer create syncs of the kind (those it has keep running); trying again puts it back on the list.',
    access: 'admin',
    params: entryParams,
    answers: { 200: { description: 'It is gone', schema: z.object({ account_id: z.string(), kind: z.string(), removed: z.literal(true) }).strict() } },
    errors: { 404: 'The account is not on the list' },
  });
  router.delete('/api/waiting-list/:kind/:account_id', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const { kind: name, account_id: accountId } = validate(entryParams, ctx.params, 'path');
    if (!(await list.remove(accountId, listedKind(list, name)))) throw notFound(`account ${accountId} on the ${name} waiting list`);
    api.logger.info({ account: accountId, kind: name }, 'account taken off the waiting list');
    ctx.body = { account_id: accountId, kind: name, removed: true };
  });
}
