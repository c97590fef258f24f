import Router from '@koa/router';
import Koa from 'koa';
import { ConsoleSessions } from '../control/console-sessions.ts';
import { TributaryError } from '../errors.ts';
import { withConsoleSessions } from './auth.ts';
import { consoleStaticRoutes } from './console-static.ts';
import type { ApiOptions } from './context.ts';
import { refuseNulInUrl } from './edge.ts';
import { errorMiddleware } from './errors.ts';
import { accountRoutes } from './routes/accounts.ts';
import { consoleDataRoutes, type ConsoleDataOptions } from './routes/console-data.ts';
import { consoleSessionRoutes } from './routes/console-session.ts';
import { metricsRoutes, type MetricsApiOptions } from './routes/metrics.ts';
import { syncRoutes } from './routes/syncs.ts';
import { waitRoutes, type WaitApiOptions } from './routes/wait.ts';
import { webhookRoutes, type WebhookApiOptions } from './routes/webhooks.ts';

/**
 * ApiOptions plus what the webhook routes need (the secret box, the private-address switch),
 * the wait endpoint (the event bus, pass signals) and /metrics (the process's metrics).
 */
export type ApiAppOptions = ApiOptions & WebhookApiOptions & WaitApiOptions & MetricsApiOptions & ConsoleDataOptions;

export function createApiApp(api: ApiAppOptions): Koa {
  const app = new Koa();
  app.silent = true; // errors are logged once, by errorMiddleware
  const router = new Router();
  // The console's session cookie is accepted wherever a Bearer token is (same-origin, CSRF-checked).
  const sessions = new ConsoleSessions(api.pool);
  api = { ...api, authenticate: withConsoleSessions(api.authenticate, sessions) };

  router.get('/healthz', async (ctx) => {
    try {
      await api.pool.query('SELECT 1');
      ctx.body = { ok: true };
    } catch {
      throw new TributaryError('unavailable', 'the control database is unreachable');
    }
  });
  accountRoutes(router, api);
  syncRoutes(router, api);
  webhookRoutes(router, api);
  waitRoutes(router, api);
  metricsRoutes(router, api);
  consoleDataRoutes(router, api);
  consoleSessionRoutes(router, api, sessions);
  consoleStaticRoutes(router);

  app.use(errorMiddleware(api.logger));
  app.use(refuseNulInUrl);
  if (api.publicOrigin) {
    const publicOrigin = api.publicOrigin;
    app.use((ctx, next) => {
      ctx.state.publicOrigin = publicOrigin;
      return next();
    });
  }
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
  return app;
}
