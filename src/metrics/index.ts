import type pg from 'pg';
import type { StatusBounds } from '../control/status.ts';
import { PROMETHEUS_CONTENT_TYPE } from './exposition.ts';
import { type Counter, type Histogram, LATENCY_BUCKETS, MetricsRegistry } from './registry.ts';
import { serverFamilies } from './servers.ts';
import { driftFamilies } from './drift.ts';
import { syncFamilies } from './syncs.ts';
import { webhookFamilies } from './webhooks.ts';

export { PROMETHEUS_CONTENT_TYPE };

const KNOWN_UPSTREAMS = new Set(['api.airtable.com', 'api.stripe.com']);
export { MetricsRegistry } from './registry.ts';

/** What the proxy reports of each request it answered (its own errors included). */
export interface ProxyMetrics {
  /** `upstream`: the upstream host (api.airtable.com, api.stripe.com); `status`: the status sent to the client. */
  proxyRequest(upstream: string, status: number, seconds: number): void;
}

/**
 * The service's metrics: in-process ones (the proxy's, kept by the process that runs it)
 * and per-sync ones read from the control database at scrape time. One per process, made
 * in main.ts and handed to the API (which serves /metrics) and the proxy.
 */
export class ServiceMetrics implements ProxyMetrics {
  readonly registry = new MetricsRegistry();
  private readonly proxyRequests: Counter;
  private readonly proxyLatency: Histogram;

  /** `kafka`: whether the service relays to Kafka (a relay cursor is then a delivery path); `statusBounds`: Tunables.status. */
  constructor(options: { pool: pg.Pool; kafka?: boolean; statusBounds?: Partial<StatusBounds> }) {
    this.proxyRequests = this.registry.counter(
      'tributary_proxy_requests_total',
      'Requests the write-through proxy answered, by upstream host and status sent.',
      ['upstream', 'status'],
    );
    this.proxyLatency = this.registry.histogram(
      'tributary_proxy_request_duration_seconds',
      'Time from a proxy request arriving to its answer being sent, in seconds (database write included).',
      ['upstream'],
      LATENCY_BUCKETS,
    );
    this.registry.collect(() => syncFamilies(options.pool, { kafka: options.kafka ?? false, statusBounds: options.statusBounds }));
    this.registry.collect(() => driftFamilies(options.pool));
    this.registry.collect(() => webhookFamilies(options.pool));
    this.registry.collect(() => serverFamilies(options.pool));
  }

  proxyRequest(upstream: string, status: number, seconds: number): void {
    // Labels stay few whatever clients send: a host the proxy refuses is "other".
    const host = KNOWN_UPSTREAMS.has(upstream) ? upstream : 'other';
    const code = Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : 'other';
    this.proxyRequests.inc({ upstream: host, status: code });
    if (Number.isFinite(seconds) && seconds >= 0) this.proxyLatency.observe({ upstream: host }, seconds);
  }

  render(): Promise<string> {
    return this.registry.render();
  }
}
