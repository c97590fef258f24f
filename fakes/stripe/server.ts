/**
 * The HTTP pipeline, in the order Stripe applies it: injected faults, authentication, the
 * per-account rate limit, API version, routing, restricted-key permissions, parameter
 * validation, idempotency, the handler, then expansion. Every answer carries Request-Id and
 * Stripe-Version.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { arrivalLatenessMs } from '../shared/arrival.ts';
import { readBody, requestLine, sendJson } from '../shared/http-io.ts';
import type { AccountState } from './account.ts';
import { allowed, type KeyEntry, permissionName, presentedKey } from './auth.ts';
import { Ctx } from './context.ts';
import { accountById, type Core } from './core.ts';
import { faultError, invalidKey, invalidRequest, maskKey, missingKey, permissionDenied, rateLimited, StripeApiError, unrecognizedUrl } from './errors.ts';
import { applyExpand } from './expand.ts';
import { decodeForm, fingerprint, type RawNode } from './form.ts';
import { requestId } from './ids.ts';
import { type Input, type Params, validateParams } from './params.ts';
import { INCLUDABLES, RENDERERS } from './resources/index.ts';
import type { Resolved, Router } from './router.ts';
import type { Route } from './routes.ts';
import { endpointParams, specVersion } from './spec/index.ts';
import type { StripeObject } from './store.ts';
import { groupOf, unmodeled } from './unmodeled.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const VERSION = /^(\d{4})-(\d{2})-(\d{2})(\.[a-z]+)?$/;

function validVersion(v: string): boolean {
  const m = VERSION.exec(v);
  if (!m) return false;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3]);
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Applies read-time renderers to an answer (an object or a list of them). */
function render(ctx: Ctx, body: unknown): unknown {
  if (!body || typeof body !== 'object') return body;
  const o = body as StripeObject;
  if (o.object === 'list' || o.object === 'search_result') {
    const data = o.data as StripeObject[];
    if (!data.some((d) => RENDERERS[d.object])) return body;
    return { ...o, data: data.map((d) => RENDERERS[d.object]?.(ctx, d) ?? d) };
  }
  const r = RENDERERS[o.object];
  return r ? r(ctx, o) : body;
}

function expandPaths(params: Params): string[] {
  const e = params.expand;
  return Array.isArray(e) ? e.filter((x): x is string => typeof x === 'string') : [];
}

/** Runs a resolved endpoint for a context: validated params in, rendered and expanded answer out. */
export function execute(ctx: Ctx, method: string, pathname: string, resolved: Resolved, raw: Record<string, Input>): unknown {
  const route: Route | undefined = resolved.route;
  // Writes the fake does not model have no parameter schema to check against.
  if (!route && method !== 'GET') return unmodeled(ctx, method, pathname, resolved);
  const schema = route?.schema ?? endpointParams(method, resolved.template);
  const params = validateParams(schema, raw);
  const body = route ? route.handler({ ctx, params, path: resolved.path, url: pathname }) : unmodeled(ctx, method, pathname, resolved);
  return applyExpand(ctx, render(ctx, body), expandPaths(params), INCLUDABLES);
}

interface Answer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
  truncate?: boolean;
}

class Pipeline {
  constructor(
    private readonly core: Core,
    private readonly router: Router,
  ) {}

  private authenticate(headers: IncomingHttpHeaders): { key: string; entry: KeyEntry; account: AccountState } {
    const key = presentedKey(headers);
    if (!key) throw missingKey();
    const entry = this.core.keys.get(key);
    const account = entry && accountById(this.core, entry.accountId);
    if (!entry || !account) throw invalidKey(key);
    return { key, entry, account };
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Stripe counts a request when it arrives, not when a busy server gets round to it.
    const arrivedAt = this.core.clock.nowMs() - arrivalLatenessMs(req.headers, this.core.trustArrivalStamps);
    const reqId = requestId();
    const { method, url } = requestLine(req);
    const pathname = url.pathname;
    this.core.stats.request(pathname);
    const body = await readBody(req);
    const asked = header(req.headers, 'stripe-version');
    const headers: Record<string, string> = { 'Request-Id': reqId };
    const peekKey = presentedKey(req.headers);
    const peekAccount = peekKey ? this.core.keys.get(peekKey)?.accountId : undefined;
    let livemode = false;
    // Stripe only links a request log once it knows whose request it was.
    let logged = false;

    const send = (a: Answer) => sendJson(res, a.status, a.body, { headers: a.headers, ...(a.truncate ? { truncate: true } : {}) });
    let truncate = false;
    try {
      const fault = this.core.faults.take({ method, path: pathname, account: peekAccount, acting: header(req.headers, 'stripe-account') });
      if (fault?.kind === 'hang') return; // never answered; close() drops the socket
      if (fault?.kind === 'status') {
        const status = fault.status as number;
        headers['Stripe-Version'] = asked ?? specVersion();
        send({ status, body: fault.body ?? faultError(status).toBody(peekAccount ? reqId : undefined, false), headers });
        return;
      }
      if (fault?.kind === 'delay') await sleep(fault.delayMs ?? 1000);
      truncate = fault?.kind === 'truncate';
      const late = fault?.kind === 'late' ? (fault.delayMs ?? 1000) : 0;
      if (body === null) throw invalidRequest('Request body is too large.', {}, 413);

      const { key, entry, account } = this.authenticate(req.headers);
      livemode = account.livemode;
      logged = true;
      const limiter = this.core.limiters?.[account.livemode ? 'live' : 'test'];
      const arrival = { key: account.id, at: arrivedAt, method, path: pathname, agent: header(req.headers, 'user-agent') ?? '' };
      const limited = limiter ? !limiter.allow(account.id, arrival.at) : false;
      this.core.stats.account(account.id, limited);
      if (limited) {
        this.core.stats.limitedPath(pathname);
        this.core.stats.refusals.refused(arrival);
        throw rateLimited();
      }
      if (limiter) this.core.stats.refusals.arrived(arrival);
      if (asked !== undefined && !validVersion(asked)) throw invalidRequest(`Invalid Stripe API version: ${asked}`);
      const apiVersion = asked ?? account.apiVersion;
      headers['Stripe-Version'] = apiVersion;
      // Connect: the platform acts on one of its connected accounts (counted against its own limit above).
      const onBehalf = header(req.headers, 'stripe-account');
      let acting = account;
      if (onBehalf && onBehalf !== account.id) {
        const connected = account.connected.get(onBehalf);
        if (!connected) {
          throw new StripeApiError(
            403,
            'invalid_request_error',
            `The provided key '${maskKey(key)}' does not have access to account '${onBehalf}' (or that account does not exist). Application access may have been revoked.`,
            { code: 'account_invalid' },
          );
        }
        if (!allowed(entry, 'connect', false)) throw permissionDenied(key, account.id, permissionName('connect', false));
        acting = connected;
        this.core.stats.acting(connected.id, pathname);
      }

      const resolved = this.router.resolve(method, pathname);
      if (!resolved) throw unrecognizedUrl(method, pathname);
      const group = resolved.route?.group ?? groupOf(resolved);
      const write = method !== 'GET';
      if (!allowed(entry, group, write)) throw permissionDenied(key, account.id, permissionName(group, write));

      const query = decodeForm(url.search.slice(1));
      const raw: RawNode = method === 'POST' ? { ...query, ...decodeForm((body as Buffer).toString('utf8')) } : query;
      const idemKey = method === 'POST' ? header(req.headers, 'idempotency-key') : undefined;
      const request = { id: reqId, idempotency_key: idemKey ?? null };
      if (idemKey !== undefined) {
        headers['Idempotency-Key'] = idemKey;
        if (idemKey.length > 255) throw invalidRequest('Idempotency keys can be at most 255 characters long.');
        const print = fingerprint(raw);
        const saved = acting.idempotency.lookup(idemKey, pathname, print, this.core.clock.nowMs());
        if (saved) {
          send({
            status: saved.status,
            body: saved.body,
            headers: { ...headers, 'Idempotent-Replayed': 'true', 'Original-Request': saved.requestId },
            truncate,
          });
          return;
        }
        const answer = this.run(new Ctx(acting, this.core.clock, request, apiVersion), method, pathname, resolved, raw, reqId);
        // Requests that failed validation are not saved (Stripe saves only what began executing).
        if (answer.status < 400 || answer.status === 402 || answer.status >= 500) {
          acting.idempotency.save(idemKey, pathname, print, { status: answer.status, body: answer.body, requestId: reqId }, this.core.clock.nowMs());
        }
        if (late) await sleep(late);
        send({ ...answer, headers, truncate });
        return;
      }
      const answer = this.run(new Ctx(acting, this.core.clock, request, apiVersion), method, pathname, resolved, raw, reqId);
      if (late) await sleep(late);
      send({ ...answer, headers, truncate });
    } catch (e) {
      headers['Stripe-Version'] ??= asked ?? specVersion();
      if (e instanceof StripeApiError) {
        send({ status: e.status, body: e.toBody(logged ? reqId : undefined, livemode), headers, truncate });
        return;
      }
      // A bug in the fake, not a Stripe behaviour: say so loudly but keep serving.
      const message = e instanceof Error ? e.message : String(e);
      send({ status: 500, body: { error: { message: `fake stripe bug: ${message}`, type: 'api_error' } }, headers });
    }
  }

  /** The handler's answer, or the error it threw as Stripe would answer it. */
  private run(ctx: Ctx, method: string, pathname: string, resolved: Resolved, raw: RawNode, reqId: string): { status: number; body: unknown } {
    try {
      return { status: 200, body: execute(ctx, method, pathname, resolved, raw) };
    } catch (e) {
      if (e instanceof StripeApiError) return { status: e.status, body: e.toBody(reqId, ctx.livemode) };
      throw e;
    }
  }
}

export function createStripeServer(core: Core, router: Router): Server {
  const pipeline = new Pipeline(core, router);
  const server = createServer((req, res) => {
    pipeline.handle(req, res).catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: 'unexpected failure', type: 'api_error' } });
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });
  return server;
}
