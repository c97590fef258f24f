import type Router from '@koa/router';
import { REGION_PATTERN } from '../../config.ts';
import { notFound } from '../../errors.ts';
import { requireAdmin } from '../auth.ts';
import { readJson, validate } from '../body.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { serverAnswer, serverView } from '../views.ts';
import { z } from '../zod.ts';

/** A region's name, as a server's and as a sync's. */
export const regionSchema = z.string().regex(REGION_PATTERN, 'must be lower-case letters, digits and hyphens, up to 63 (like us-west-2)');

const capacity = z.number().int().min(0).max(100_000);

const addServer = z
  .object({
    url: z.string().max(2048).describe('Admin URL, `postgres://user:password@host:5432/postgres` (`sslmode` the only parameter). Sealed, never returned'),
    region: regionSchema.describe('Where the server is, e.g. `us-west-2`; syncs name it to be placed here'),
    capacity: capacity.min(1).describe('Syncs it may hold (the server must have a replication slot and a WAL sender free for each)'),
  })
  .strict()
  .openapi('AddServer');

const patchServer = z
  .object({
    capacity: capacity.optional().describe('Syncs it may hold; a raise is checked against the free slots and WAL senders'),
    draining: z.boolean().optional().describe('true: it keeps its syncs and gets no new ones'),
  })
  .strict()
  .refine((v) => v.capacity !== undefined || v.draining !== undefined, 'give capacity or draining')
  .openapi('PatchServer', { description: 'At least one of the two' });

const serverParams = z.object({ id: z.string().describe('The server (`srv_…`)') });

const NOT_FOUND = 'No such server';

export function serverRoutes(router: Router, api: ApiOptions, doc: ApiDocument): void {
  doc.route({
    method: 'post',
    path: '/api/servers',
    operationId: 'addServer',
    tag: 'servers',
    summary: 'Add a server to the pool',
    description:
      'Connects to the server and checks that it can hold `capacity` sync databases: `wal_level=logical`, a free replication slot and WAL sender for each, and a role with CREATEDB, CREATEROLE and REPLICATION (or superuser). Then it revokes CONNECT on its maintenance databases from PUBLIC, as on the configured server.',
    access: 'admin',
    body: { schema: addServer },
    answers: { 201: { description: 'The new member; its URL is never shown', schema: serverAnswer } },
    errors: {
      400: '`url` is not a `postgres://` URL with a host and a port, or takes a parameter other than `sslmode`',
      409: 'The URL leads to a server already in the pool (the same address and port)',
      422: "The server cannot be reached, or cannot hold the sync databases (the message says which: wal_level, slots, WAL senders, the role's rights)",
    },
  });
  router.post('/api/servers', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const input = validate(addServer, await readJson(ctx, api.bodyLimit));
    const server = await api.servers.add(input);
    ctx.status = 201;
    ctx.body = serverView(server);
  });

  doc.route({
    method: 'get',
    path: '/api/servers',
    operationId: 'listServers',
    tag: 'servers',
    summary: 'List the pool',
    access: 'admin',
    answers: { 200: { description: 'Every member, the first first', schema: z.object({ data: z.array(serverAnswer) }).strict() } },
  });
  router.get('/api/servers', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    ctx.body = { data: (await api.servers.list()).map(serverView) };
  });

  doc.route({
    method: 'get',
    path: '/api/servers/:id',
    operationId: 'getServer',
    tag: 'servers',
    summary: 'Show a server of the pool',
    access: 'admin',
    params: serverParams,
    answers: { 200: { description: 'The member', schema: serverAnswer } },
    errors: { 404: NOT_FOUND },
  });
  router.get('/api/servers/:id', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const server = await api.servers.get(ctx.params.id!);
    if (!server) throw notFound(`server ${ctx.params.id}`);
    ctx.body = serverView(server);
  });

  doc.route({
    method: 'patch',
    path: '/api/servers/:id',
    operationId: 'updateServer',
    tag: 'servers',
    summary: "Change a server's capacity, or drain it",
    access: 'admin',
    params: serverParams,
    body: { schema: patchServer },
    answers: { 200: { description: 'The member as changed', schema: serverAnswer } },
    errors: { 404: NOT_FOUND, 422: 'A raised capacity the server has no free slots or WAL senders for, or the server cannot be reached to check it' },
  });
  router.patch('/api/servers/:id', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const input = validate(patchServer, await readJson(ctx, api.bodyLimit));
    ctx.body = serverView(await api.servers.update(ctx.params.id!, input));
  });

  doc.route({
    method: 'delete',
    path: '/api/servers/:id',
    operationId: 'removeServer',
    tag: 'servers',
    summary: 'Remove an empty server from the pool',
    description:
      'The server itself is left as it is. The configured server may be removed too once it holds no sync; it joins again at a start that finds the pool empty.',
    access: 'admin',
    params: serverParams,
    answers: { 200: { description: 'It is out of the pool', schema: z.object({ id: z.string(), deleted: z.literal(true) }).strict() } },
    errors: { 404: NOT_FOUND, 409: 'It still holds syncs (the message says how many)' },
  });
  router.delete('/api/servers/:id', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    await api.servers.remove(ctx.params.id!);
    ctx.body = { id: ctx.params.id!, deleted: true };
  });
}
