import type http from 'node:http';
import type pg from 'pg';
import type { AccountStore } from '../../control/accounts.ts';
import { TributaryError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { EventBus } from '../bus.ts';
import type { EventLogReader } from '../log.ts';
import { FailedCredentials } from '../../credentials/throttle.ts';
import { clientAddress } from '../../http/client-address.ts';
import { EventCredentials } from './auth.ts';
import { DEFAULT_LIMITS, type RequestScope, type RestContext, type RestLimits } from './context.ts';
import { startGroupSweeper } from './group-sweep.ts';
import { GroupStore } from './groups.ts';
import { methodNotAllowed, parseJson, readBody, sendError, sendJson } from './http.ts';
import { refuseNulInUrl } from '../../http/nul.ts';
import { routes, type Route } from './routes.ts';
import { TopicAccess } from './topics.ts';
import { KeyedLimit, type Release } from '../../tenancy/keyed-limit.ts';
import { tooManyRequests } from '../../tenancy/limits.ts';
import { TenantScope } from '../../tenancy/scope.ts';
import { holdRefusal } from '../../http/refusal-hold.ts';

export interface EventsRestOptions {
  /** The control database: accounts, the event log, consumer groups. */
  pool: pg.Pool;
  accounts: AccountStore;
  reader: EventLogReader;
  /** Started by the caller; long polls wake on it. */
  bus: EventBus;
  logger: Logger;
  limits?: Partial<RestLimits>;
  /** Failed credential checks, shared with the API in one process; a default one (10 and 30 a minute) otherwise. */
  throttle?: FailedCredentials;
  /** Reverse proxies in front (Config.reverseProxies): whose X-Forwarded-For names the client. */
  reverseProxies?: number;
  /** The request scope the control pool (FairPool) shares its connections by. */
  scope?: TenantScope;
}

/** A request listener for `listen()`, and `close()`, which ends every waiting long poll (with an empty answer). */
export type EventsRestHandler = http.RequestListener & { close(): Promise<void> };

/**
 * The event REST interface (the Upstash Kafka REST shapes), served on
 * TRIBUTARY_EVENTS_PORT. Every request but /healthz needs the account's event credentials
 * (HTTP basic auth); an account only ever sees its own topics and consumer groups.
 */
export function createEventsRestHandler(options: EventsRestOptions): EventsRestHandler {
  const limits: RestLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const logger = options.logger.child({ part: 'events-rest' });
  const ctx: RestContext = {
    pool: options.pool,
    reader: options.reader,
    bus: options.bus,
    logger,
    limits,
    topics: new TopicAccess(options.pool),
    groups: new GroupStore(options.pool),
  };
  const sweeper = startGroupSweeper({
    pool: options.pool,
    groups: ctx.groups,
    logger,
    everyMs: limits.groupSweepMs,
    retentionMs: limits.groupRetentionMs,
  });
  const credentials = new EventCredentials({
    accounts: options.accounts,
    throttle: options.throttle ?? new FailedCredentials({ logger }),
    cacheMs: limits.credentialCacheMs,
  });
  const sourceOf = (req: http.IncomingMessage) =>
    clientAddress({ remoteAddress: req.socket.remoteAddress, forwardedFor: req.headers['x-forwarded-for'], reverseProxies: options.reverseProxies ?? 0 });
  const inFlight = new Set<AbortController>();
  const longPolls = new KeyedLimit(limits.maxLongPollsPerAccount);
  const scope = options.scope ?? new TenantScope();
  let closed = false;

  const serve = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const started = performance.now();
    const method = (req.method ?? 'GET').toUpperCase();
    const [path = '/', query = ''] = splitOnce(req.url ?? '/', '?');
    const controller = new AbortController();
    let releasePoll: Release | undefined;
    inFlight.add(controller);
    // The client went away before its answer: stop waiting for events on its behalf.
    res.once('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    try {
      if (closed) throw new TributaryError('unavailable', 'the event REST interface is shutting down', { expose: true });
      refuseNulInUrl(req.url ?? '/');
      const { route, params } = match(method, path);
      scope.claimCredential(req.headers.authorization);
      const accountId = route.public ? '' : await credentials.authenticate(req.headers.authorization, sourceOf(req));
      // A long poll mostly waits: its own cap bounds it, and it takes no working place.
      await scope.admit(accountId || undefined, { work: !route.longPoll });
      if (route.longPoll) {
        releasePoll = longPolls.tryAcquire(accountId);
        if (!releasePoll) {
          throw tooManyRequests(
            `at most ${longPolls.limit} long polls (/consume and /fetch) of one account may be open at once; retry when one of them has answered`,
          );
        }
      }
      const answer = await route.run(ctx, {
        req,
        params,
        query: new URLSearchParams(query),
        scope: { accountId, signal: controller.signal } satisfies RequestScope,
        body: async () => parseJson(await readBody(req, limits.maxBodyBytes)),
      });
      sendJson(res, 200, answer.body);
      if (answer.undelivered && !(await delivered(res))) {
        await answer.undelivered().catch((err: unknown) => logger.warn({ err, path }, 'could not rewind an undelivered consume'));
      }
    } catch (thrown) {
      await holdRefusal(thrown, controller.signal);
      sendError(res, thrown, logger, { method, path });
    } finally {
      releasePoll?.();
      inFlight.delete(controller);
      logger.debug({ method, path, status: res.statusCode, ms: Math.round(performance.now() - started) }, 'event REST request');
    }
  };

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    scope
      .run(() => serve(req, res))
      .catch((err: unknown) => {
        // serve() answers its own errors; this is the last line, so that nothing can crash the process.
        logger.error({ err }, 'event REST request failed outside its handler');
        if (!res.headersSent) sendJson(res, 500, { error: 'internal error; see the service log', status: 500 });
        else res.destroy();
      });
  };
  return Object.assign(handler, {
    close: async () => {
      closed = true;
      for (const controller of inFlight) controller.abort();
      credentials.clear();
      await sweeper.stop();
    },
  });
}

function splitOnce(text: string, separator: string): [string, string] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, ''] : [text.slice(0, at), text.slice(at + 1)];
}

/** Finds the route of a path: 404 for none, 405 (with Allow) for a known path and another method. */
function match(method: string, path: string): { route: Route; params: string[] } {
  const segments = path.split('/').filter((s) => s !== '');
  let decoded: string[];
  try {
    decoded = segments.map((s) => decodeURIComponent(s));
  } catch {
    throw new TributaryError('invalid_request', 'the path is not validly percent-encoded');
  }
  const shaped = routes.filter((route) => route.path.length === decoded.length && route.path.every((part, i) => part.startsWith(':') || part === decoded[i]));
  if (shaped.length === 0) throw new TributaryError('not_found', `no such endpoint: ${path}`);
  const route = shaped.find((r) => r.methods.includes(method));
  if (!route) throw methodNotAllowed(method, path, [...new Set(shaped.flatMap((r) => r.methods))]);
  const params = route.path.flatMap((part, i) => (part.startsWith(':') ? [decoded[i]!] : []));
  return { route, params };
}

/** Whether the answer was handed to the connection in full (not proof it arrived; the best we know). */
function delivered(res: http.ServerResponse): Promise<boolean> {
  if (res.writableFinished) return Promise.resolve(true);
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    res.once('finish', () => resolve(true));
    res.once('close', () => resolve(res.writableFinished));
  });
}
