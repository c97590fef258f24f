import type Router from '@koa/router';
import { PROMETHEUS_CONTENT_TYPE, ServiceMetrics } from '../../metrics/index.ts';
import { requireAdmin } from '../auth.ts';
import type { ApiOptions } from '../context.ts';
import type { ApiDocument } from '../openapi.ts';
import { z } from '../zod.ts';

export interface MetricsApiOptions {
  /** The process's metrics (the proxy reports into the same object); made here when absent. */
  metrics?: ServiceMetrics;
}

/** GET /metrics: the Prometheus text format, for the operator (admin token). */
export function metricsRoutes(router: Router, api: ApiOptions & MetricsApiOptions, doc: ApiDocument): void {
  const metrics = api.metrics ?? new ServiceMetrics({ pool: api.pool, kafka: api.events.kafkaBrokers.length > 0 });
  doc.route({
    method: 'get',
    path: '/metrics',
    operationId: 'metrics',
    tag: 'service',
    summary: "The service's metrics, for Prometheus",
    access: 'admin',
    answers: { 200: { description: 'The Prometheus text exposition format', contentType: PROMETHEUS_CONTENT_TYPE, schema: z.string() } },
  });
  router.get('/metrics', async (ctx) => {
    requireAdmin(await api.authenticate(ctx));
    const text = await metrics.render();
    ctx.set('Cache-Control', 'no-store');
    ctx.body = text;
    ctx.set('Content-Type', PROMETHEUS_CONTENT_TYPE);
  });
}
