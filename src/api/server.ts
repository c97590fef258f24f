import { WaitingList } from '../control/waiting-list.ts';
import { waitingListRoutes } from './routes/waiting-list.ts';
import { createHash } from 'node:crypto';
import Router from '@koa/router';
import Koa from 'koa';
import { ConsoleSessions } from '../control/console-sessions.ts';
import { AWAY_RETRY_AFTER_S } from '../db/transient.ts';
import { TributaryError } from '../errors.ts';
import { clientAddress } from '../http/client-address.ts';
import { withConsoleSessions } from './auth.ts';
import { consoleStaticRoutes } from './console-static.ts';
import type { ApiOptions } from './context.ts';
import { refuseNulInUrl } from './edge.ts';
import { admittingTenant, scopeMiddleware } from './tenancy.ts';
import { TenantCaps } from '../tenancy/limits.ts';
import { TenantScope } from '../tenancy/scope.ts';
import { errorMiddleware } from './errors.ts';
import { ApiDocument } from './openapi.ts';
import { accountRoutes } from './routes/accounts.ts';
import { backfillRoutes } from './routes/backfills.ts';
import { SyncTables } from './sync-tables.ts';
import { consoleDataRoutes, type ConsoleDataOptions } from './routes/console-data.ts';
import { consoleSessionRoutes } from './routes/console-session.ts';
import { attachmentRoutes, type AttachmentApiOptions } from './routes/attachments.ts';
import { hookRoutes } from './routes/hooks.ts';
import { metricsRoutes, type MetricsApiOptions } from './routes/metrics.ts';
import { serverRoutes } from './routes/servers.ts';
import { syncRoutes } from './routes/syncs.ts';
import { waitRoutes, type WaitApiOptions } from './routes/wait.ts';
import { webhookControlRoutes } from './routes/webhook-controls.ts';
import { webhookRoutes, type WebhookApiOptions } from './routes/webhooks.ts';
import { z } from './zod.ts';

/**
 * ApiOptions plus what the webhook routes need (the secret box, the private-address switch),
 * the wait endpoint (the event bus, pass signals), /metrics (the process's metrics) and the
 * stable attachment links (their signer, and how kinds reach their upstreams).
 */
export type ApiAppOptions = ApiOptions & WebhookApiOptions & WaitApiOptions & MetricsApiOptions & ConsoleDataOptions & AttachmentApiOptions;

/** The API's Koa app, and its router (test/api.openapi.test.ts lists the router's routes). */
export type ApiApp = Koa & { readonly router: Router };

export function createApiApp(api: ApiAppOptions): ApiApp {
  const app = new Koa();
  app.silent = true; // errors are logged once, by errorMiddleware
  const router = new Router();
  // The console's session cookie is accepted wherever a Bearer token is (same-origin, CSRF-checked).
  const sessions = new ConsoleSessions(api.pool);
  const tenantScope = api.tenantScope ?? new TenantScope();
  const caps = api.caps ?? new TenantCaps();
  // One pooled reader of the sync databases for every route that looks into them.
  const syncTables = api.syncTables ?? new SyncTables({ syncService: api.syncService, logger: api.logger });
  // Kinds behind a waiting list must be kinds (a typo would open nothing and close nothing).
  const waitingList = api.waitingList ?? new WaitingList(api.pool, []);
  for (const kind of waitingList.kinds)
    if (!api.kinds.names().includes(kind)) throw new Error(`TRIBUTARY_WAITING_LIST_KINDS: ${kind} is not a kind of sync (${api.kinds.names().join(', ')})`);
  api = {
    ...api,
    authenticate: admittingTenant(withConsoleSessions(api.authenticate, sessions), tenantScope, caps),
    tenantScope,
    caps,
    syncTables,
    waitingList,
  };

  const doc = new ApiDocument();

  doc.route({
    method: 'get',
    path: '/healthz',
    operationId: 'health',
    tag: 'service',
    summary: 'Whether the service can reach its control database',
    access: 'public',
    answers: { 200: { description: 'Healthy', schema: z.object({ ok: z.literal(true) }).strict() } },
    errors: { 503: 'The control database is unreachable' },
  });
  router.get('/healthz', async (ctx) => {
    try {
      await api.pool.query('SELECT 1');
      ctx.body = { ok: true };
    } catch (cause) {
      throw new TributaryError('unavailable', 'the control database is unreachable', { cause, expose: true, retryAfterSeconds: AWAY_RETRY_AFTER_S });
    }
  });
  accountRoutes(router, api, doc);
  waitingListRoutes(router, api, doc);
  syncRoutes(router, api, doc);
  serverRoutes(router, api, doc);
  webhookRoutes(router, api, doc);
  webhookControlRoutes(router, api, doc);
  backfillRoutes(router, api, doc);
  waitRoutes(router, api, doc);
  hookRoutes(router, api, doc);
  attachmentRoutes(router, api, doc);
  metricsRoutes(router, api, doc);
  consoleDataRoutes(router, api, doc);
  consoleSessionRoutes(router, api, sessions, doc);
  consoleStaticRoutes(router, doc);

  doc.route({
    method: 'get',
    path: '/api/openapi.json',
    operationId: 'openapi',
    tag: 'service',
    summary: 'This document',
    description: 'Holds no secrets, so it needs no token.',
    access: 'public',
    answers: { 200: { description: 'The OpenAPI 3.1 document of this API', schema: z.object({ openapi: z.literal('3.1.0') }).passthrough() } },
  });
  // Built and serialised once, after every route has described itself: the route takes no
  // token, so a request must cost no more than sending ~100 KB (or a 304 to a client that has it).
  const document = Buffer.from(JSON.stringify(doc.build()));
  const etag = `"${createHash('sha256').update(document).digest('base64url').slice(0, 27)}"`;
  router.get('/api/openapi.json', (ctx) => {
    ctx.set('ETag', etag);
    ctx.set('Cache-Control', 'public, max-age=300');
    if (ctx.get('If-None-Match') === etag) {
      ctx.status = 304;
      return;
    }
    ctx.type = 'application/json';
    ctx.body = document;
  });

  app.use(errorMiddleware(api.logger));
  app.use(refuseNulInUrl);
  const reverseProxies = api.reverseProxies ?? 0;
  app.use((ctx, next) => {
    // Worked out once: the failed-credential throttle counts per client address.
    ctx.state.clientAddress = clientAddress({ remoteAddress: ctx.req.socket.remoteAddress, forwardedFor: ctx.req.headers['x-forwarded-for'], reverseProxies });
    return next();
  });
  if (api.publicOrigin) {
    const publicOrigin = api.publicOrigin;
    app.use((ctx, next) => {
      ctx.state.publicOrigin = publicOrigin;
      return next();
    });
  }
  app.use(scopeMiddleware(tenantScope));
  app.use(router.routes());
  app.use(async (ctx, next) => {
    await next();
    // A known path with a method it does not take: say so instead of a bare 404.
    const allowed = router.match(ctx.path, ctx.method).path.flatMap((layer) => layer.methods);
    if (ctx.status === 404 && ctx.body === undefined && allowed.length > 0) {
      ctx.set('Allow', [...new Set(allowed)].join(', '));
      throw new TributaryError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
    }
  });
  return Object.assign(app, { router });
}
