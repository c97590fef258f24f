import type { AttachmentLinks } from '../attachments/links.ts';
import type http from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type pg from 'pg';
import type { SyncService } from '../control/sync-service.ts';
import type { SyncStore } from '../control/syncs.ts';
import { TributaryError, toError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import type { QuotaGrant, QuotaLimiter } from '../quota/limiter.ts';
import { isTransientDbError, retryTransient } from '../db/transient.ts';
import { upstreamBase } from '../upstream/http.ts';
import { decoded, DEFAULT_MAX_BODY_BYTES, declaredLength, jsonOf, readAll, sizeLimit, tooLarge } from './body.ts';
import { ProxyError, refuse, sendProxyError } from './errors.ts';
import { Forwarder } from './forward.ts';
import { ALLOWED_METHODS, checkRequestHeaders, clientResponseHeaders, upstreamRequestHeaders } from './headers.ts';
import type { SourceKinds } from '../kinds/registry.ts';
import type { Plan, PlanRequest, PlanQuota, ProxyKindContext } from './plan.ts';
import { KnownCredentials } from './credentials.ts';
import { ClientQueue } from './quota.ts';
import { type ProxyHosts, type ProxyRoute, routeOf, upstreamTarget, type UpstreamTarget } from './routing.ts';
import { SyncTargets } from './targets.ts';

/** Why a request's wait for the quota ended: the client closed its connection. */
class ClientGone extends Error {
  constructor() {
    super('the client went away');
  }
}

export interface ProxyOptions {
  /** Control database: which syncs exist, and the shared quota's log. */
  pool: pg.Pool;
  syncs: SyncStore;
  syncService: SyncService;
  /** The kinds of sync: those with a proxy part name the hosts forwarded to and plan their requests. */
  kinds: SourceKinds;
  /** The quota shared with the syncs. Absent = no limiting at all (benchmarks against an unlimited fake only). */
  limiter?: QuotaLimiter;
  /** TRIBUTARY_UPSTREAMS: upstream host → base URL; absent hosts are the real https ones. */
  upstreams: Map<string, string>;
  logger: Logger;
  /** Largest request body (default 10 MiB; 413 past it). */
  maxBodyBytes?: number;
  /** Until the upstream connection is up (default 10 s; 504 past it). */
  connectTimeoutMs?: number;
  /** Until the upstream's answer begins, and between its chunks (default 80 s, Stripe's own client timeout; 504 past it). */
  responseTimeoutMs?: number;
  /** The bounded wait for quota: at most maxWaitMs (default 10 s) and maxWaiting requests per key (default: what the quota serves in that time). */
  queue?: { maxWaitMs?: number; maxWaiting?: number };
  /** Time scale of the upstream (tests with a sped-up fake, as the sync's `timeScale`); 1 in production. */
  timeScale?: number;
  /** Told of every answered request: upstream host ('other' when refused before routing), status sent, seconds. */
  metrics?: ProxyMetrics;
  /**
   * How long a write-through keeps trying while a database (the sync's, or the control
   * database) is away: restarted, failing over, out of connection slots (default 30 s).
   */
  writeThroughPatienceMs?: number;
  /** Stable attachment links, which some syncs' columns hold (their rows are written with them). */
  attachmentLinks?: AttachmentLinks;
}

export type ProxyHandler = http.RequestListener & {
  /** CONNECT requests (the server's 'connect' event): refused with 405; listen() wires it. */
  onConnect(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Waits for requests in flight (their write-through), then closes upstream connections and sync-database pools. */
  close(): Promise<void>;
};

/** Added to a 2xx answer whose write could not be written through: the database catches up with the sync, later. */
const WRITE_THROUGH_HEADER = 'Tributary-Write-Through';

/** Write answers are read whole before the client gets them; this bounds the memory one may take. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

const CONNECT_REFUSAL = (() => {
  const body = JSON.stringify({
    error: { source: 'proxy', code: 'method_not_allowed', message: 'CONNECT is refused: this is not a forward proxy; send /{upstream_host}/{path}' },
  });
  return `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
})();

/**
 * The write-through proxy: `{proxy_url}/{upstream_host}/<path>`, or a bare
 * `/v0/…` (Airtable) or `/v1/…` (Stripe) path, forwarded to the upstream unchanged but for
 * hop-by-hop headers and Host; client requests wait for the quota they share with the
 * syncs (first in line, bounded); a 2xx answer to a write is written to the matching
 * syncs' databases before the client gets it, byte for byte as the upstream sent it.
 */
export function createProxyHandler(options: ProxyOptions): ProxyHandler {
  const logger = options.logger;
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const forwarder = new Forwarder({ connectTimeoutMs: options.connectTimeoutMs ?? 10_000, responseTimeoutMs: options.responseTimeoutMs ?? 80_000 });
  const targets = new SyncTargets({
    pool: options.pool,
    syncs: options.syncs,
    syncService: options.syncService,
    logger,
    attachmentLinks: options.attachmentLinks,
  });
  const maxWaitMs = options.queue?.maxWaitMs ?? 10_000;
  const writeThroughPatience = options.writeThroughPatienceMs ?? 30_000;
  const queue = options.limiter && new ClientQueue({ limiter: options.limiter, maxWaitMs, maxWaiting: options.queue?.maxWaiting });
  // Each proxied kind: where its host is reached, its context, and its planner (made once).
  interface ProxiedKind {
    where: UpstreamTarget;
    credentials: KnownCredentials;
    early?: (req: http.IncomingMessage, route: ProxyRoute) => Promise<PlanQuota | undefined>;
    plan: (request: PlanRequest) => Promise<Plan>;
  }
  const byHost = new Map<string, ProxiedKind>();
  const known: ProxyHosts = { hosts: [], byPrefix: new Map() };
  for (const name of options.kinds.names()) {
    const kind = options.kinds.get(name);
    if (!kind.proxy) continue;
    const proxy = kind.proxy;
    const context: ProxyKindContext = {
      targets,
      limiter: options.limiter,
      pool: options.pool,
      timeScale: options.timeScale ?? 1,
      maxWaitMs,
      logger,
      baseUrl: upstreamBase(options.upstreams, kind.upstreamHost),
    };
    byHost.set(kind.upstreamHost, {
      where: upstreamTarget(options.upstreams, kind.upstreamHost),
      credentials: new KnownCredentials(proxy.syncCredentials ? { syncCredentials: (key) => proxy.syncCredentials!(context, key) } : {}),
      ...(proxy.earlyQuota ? { early: (req: http.IncomingMessage, route: ProxyRoute) => proxy.earlyQuota!(context, req, route) } : {}),
      plan: proxy.planner(context),
    });
    known.hosts.push(kind.upstreamHost);
    if (proxy.barePrefix) known.byPrefix.set(proxy.barePrefix, kind.upstreamHost);
  }
  const inFlight = new Set<Promise<void>>();

  /** What the handler learns of a request as it goes: its upstream host, and the plan's `ended` until called. */
  interface Seen {
    host: string;
    ended?: (status: number | undefined) => void;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, seen: Seen): Promise<void> {
    const started = performance.now();
    const method = req.method ?? 'GET';
    if (method === 'GET' && req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
      return;
    }
    if (!ALLOWED_METHODS.includes(method)) {
      throw refuse('method_not_allowed', `${method.slice(0, 20)} is not forwarded; methods: ${ALLOWED_METHODS.join(', ')}`, {
        allow: ALLOWED_METHODS.join(', '),
      });
    }
    checkRequestHeaders(req);
    const route = routeOf(req.url, known);
    const kind = byHost.get(route.host)!;
    seen.host = route.host;
    const declared = declaredLength(req.headers);
    if (declared !== undefined && declared > maxBody) throw tooLarge(maxBody);
    const hasBody = declared !== undefined ? declared > 0 : req.headers['transfer-encoding'] !== undefined;

    const buffered = async () => (hasBody ? readAll(req, maxBody, () => tooLarge(maxBody)) : undefined);
    // The client going away while it waits gives up its place in the queue.
    const gone = new AbortController();
    const leave = () => !res.writableFinished && gone.abort(new ClientGone());
    res.once('close', leave);
    let plan: Plan;
    let grant: QuotaGrant | undefined;
    try {
      // Only a credential known good for the quota spends it as a client; others get the
      // unverified allowance, so a flood of bad or foreign tokens cannot spend it.
      const take = async (quota: PlanQuota) => queue!.take(quota, await kind.credentials.proven(quota), gone.signal);
      // A quota known from the path (Airtable's) is asked for while the body arrives.
      const early = await kind.early?.(req, route);
      const taking = queue && early && take(early);
      taking?.catch(() => undefined); // a plan that fails first ends it (below)
      try {
        plan = await kind.plan({ req, route, readBody: buffered, ...(early ? { early } : {}) });
        seen.ended = plan.ended;
      } catch (error) {
        gone.abort(error);
        throw error;
      }
      if (queue && plan.quota) grant = await (taking ?? take(plan.quota));
    } catch (error) {
      // Nothing went upstream: the quota or the sync's lookup needs the control database, which
      // refused (restart, full slots). A 503 the client may retry, not an opaque 500.
      if (isTransientDbError(error)) {
        throw new ProxyError(
          'unavailable',
          "Tributary's database is unavailable for a moment; the request was not sent upstream, retry it",
          { 'retry-after': '1' },
          { cause: error },
        );
      }
      throw error;
    } finally {
      res.off('close', leave);
    }
    const body: Buffer | Readable | undefined = plan.body !== undefined ? plan.body : hasBody ? req.pipe(sizeLimit(maxBody)) : undefined;
    if (body && !Buffer.isBuffer(body)) req.once('error', (error) => body.destroy(error));
    const upstream = await forwarder
      .send({
        target: kind.where,
        name: route.host,
        method,
        path: plan.path,
        headers: upstreamRequestHeaders(req, kind.where.host, plan.body?.length),
        body,
        // Logged when the request has gone, not when its slot was granted: a body that streams in
        // slowly, or a busy event loop, would otherwise open the next window early (a 429 seen in CI).
        onSent: () => grant?.sent(),
      })
      // Arrived by the time its answer began (or it failed): the slot is held a window from then.
      .finally(() => grant?.answered());
    const receivedAt = Date.now();
    const status = upstream.statusCode ?? 502;
    kind.credentials.answered(plan.quota, status);
    const ended = seen.ended;
    seen.ended = undefined;
    ended?.(status);
    if (status === 429 && plan.quota && options.limiter) {
      options.limiter.refusedByUpstream(plan.quota.key);
      if (plan.quota.also) options.limiter.refusedByUpstream(plan.quota.also.key);
      logger.warn({ host: route.host, quota: plan.quota.key }, 'the upstream answered 429 despite the shared quota; widening its margin');
    }
    res.sendDate = false;

    if (plan.writeThrough && status >= 200 && status < 300 && method !== 'HEAD') {
      forwarder.watchIdle(upstream, () => upstream.destroy(new ProxyError('gateway_timeout', `${route.host} stopped sending its answer`)));
      let raw: Buffer;
      try {
        raw = await readAll(upstream, MAX_ANSWER_BYTES, () => new ProxyError('bad_gateway', `${route.host} sent an answer too large to write through`));
      } catch (error) {
        if (error instanceof ProxyError) throw error;
        throw new ProxyError('bad_gateway', `${route.host} sent an incomplete answer`, {}, { cause: error });
      }
      let outcome: object | undefined;
      let failed = false;
      try {
        const answer = jsonOf(decoded(raw, upstream.headers['content-encoding'] as string | undefined));
        const { 'stripe-version': apiVersion, date } = upstream.headers as Record<string, string | undefined>;
        const writeThrough = plan.writeThrough;
        // The client's read after the answer must see the write: a database that is away
        // for a moment (restart, failover, full slots) is waited for, within the patience.
        outcome = await targets.writing(() =>
          retryTransient(() => writeThrough(answer, { receivedAt, apiVersion, date }), {
            patienceMs: writeThroughPatience,
            onRetry: (error, attempt) =>
              attempt === 1 &&
              logger.warn({ host: route.host, path: route.path, error: toError(error).message }, 'write-through waits for the database to come back'),
          }),
        );
      } catch (error) {
        // The upstream change happened: the client gets its answer, marked; the sync brings the database in step.
        failed = true;
        logger.error({ host: route.host, path: route.path, error: toError(error).message }, 'write-through failed; the upstream answer goes back unchanged');
      }
      if (!res.destroyed) {
        const headers = clientResponseHeaders(upstream.rawHeaders);
        res.writeHead(status, upstream.statusMessage, failed ? [...headers, WRITE_THROUGH_HEADER, 'failed'] : headers);
        res.end(raw);
      }
      logger.debug({ method, host: route.host, path: route.path, status, ms: Math.round(performance.now() - started), ...outcome }, 'proxied write');
      return;
    }

    res.writeHead(status, upstream.statusMessage, clientResponseHeaders(upstream.rawHeaders));
    forwarder.watchIdle(upstream, () => upstream.destroy(new Error('the upstream stopped sending its answer')));
    await new Promise<void>((resolve) => {
      const clientDone = () => {
        if (!upstream.complete) upstream.destroy();
        resolve();
      };
      // A client that left while the upstream's headers came has closed its response already:
      // its 'close' will not come again.
      if (res.closed) return clientDone();
      // Mid-body the only way to tell the client is to cut the connection; a client gone stops the upstream.
      upstream.once('error', () => res.destroy());
      upstream.once('aborted', () => res.destroy());
      res.once('close', clientDone);
      upstream.pipe(res);
    });
    logger.debug({ method, host: route.host, path: route.path, status, ms: Math.round(performance.now() - started) }, 'proxied');
  }

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const seen: Seen = { host: 'other' };
    if (options.metrics) {
      const metrics = options.metrics;
      const arrived = performance.now();
      res.once('close', () => metrics.proxyRequest(seen.host, res.statusCode, (performance.now() - arrived) / 1000));
    }
    const work = handle(req, res, seen).catch((thrown: unknown) => {
      const error = toError(thrown);
      if (error instanceof ClientGone) {
        // Nothing went upstream and nobody is left to answer: routine, not a failure.
        logger.debug({ method: req.method, host: seen.host }, 'proxy client went away while its request waited');
      } else if (error instanceof TributaryError && error.expose) {
        if (error.status >= 500) logger.warn({ method: req.method, code: error.code, error: error.message }, 'proxy error');
        sendProxyError(res, error);
      } else {
        logger.error({ method: req.method, error: error.message }, 'proxy request failed');
        sendProxyError(res, new ProxyError('internal', 'internal error; see the service log'));
      }
      // Whatever is left of a refused body is not read: the connection closes after the answer.
      if (!req.complete) req.resume();
    });
    const tracked = work.finally(() => {
      inFlight.delete(tracked);
      seen.ended?.(undefined); // it ended without an answer from upstream
    });
    inFlight.add(tracked);
  };

  return Object.assign(handler, {
    onConnect: (_req: http.IncomingMessage, socket: Duplex) => {
      socket.on('error', () => undefined);
      socket.end(CONNECT_REFUSAL);
    },
    close: async () => {
      await Promise.allSettled([...inFlight]);
      forwarder.close();
      await targets.close();
    },
  });
}
