import { Exchange, Http1Pool, type Http1Result, type LookupFunction, type Origin } from './http1.ts';
import { aKind, ipLiteral, nonPublicKind, pinnedLookup, systemLookup, type LookupAll } from '../../http/address.ts';

/** What one POST came to. `status` is set when the receiver answered at all. */
export interface SendResult {
  ok: boolean;
  status?: number;
  /** A short, log-safe description of the failure. */
  error?: string;
  /** What the answer's Retry-After asks for, in ms from now (0 for a date past). */
  retryAfterMs?: number;
}

export interface SenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  /** Concurrent connections per receiver host (the deliverer's lane count). */
  maxSockets: number;
  /** Bytes of a response body read at most; the rest is cut off with the connection. */
  maxResponseBytes?: number;
  lookup?: LookupAll;
}

export interface Sender {
  send(url: URL, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult>;
  close(): void;
}

const USER_AGENT = 'Tributary-Webhooks/1';

/** What a destination URL comes to on the wire, worked out once per URL object. */
interface Target {
  origin: Origin;
  /** The request line, the Host header and, for URLs with credentials, Authorization. */
  prefix: string;
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

function targetOf(url: URL): Target {
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  const port = url.port ? Number(url.port) : DEFAULT_PORTS[url.protocol]!;
  const path = `${url.pathname || '/'}${url.search}`;
  let prefix = `POST ${path} HTTP/1.1\r\nhost: ${url.host}\r\n`;
  if (url.username || url.password) {
    // As node:http does for a URL with credentials: Basic authentication.
    const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    prefix += `authorization: Basic ${Buffer.from(credentials).toString('base64')}\r\n`;
  }
  return { origin: { protocol: url.protocol, hostname, port, key: `${url.protocol}//${url.host}` }, prefix };
}

const UNSAFE_HEADER_VALUE = /[\r\n\0]/;

/**
 * POSTs over keep-alive connections (http1.ts). Redirects are not followed (a 3xx is a
 * failure), response bodies are read only up to a bound, and unless private destinations
 * are allowed every new connection goes only to an address checked to be public.
 */
export function createSender(options: SenderOptions): Sender {
  const lookup = options.allowPrivate ? undefined : (pinnedLookup(options.lookup ?? systemLookup) as unknown as LookupFunction);
  const pool = new Http1Pool({ maxSockets: options.maxSockets, ...(lookup ? { lookup } : {}) });
  const maxBytes = options.maxResponseBytes ?? 4096;
  const targets = new WeakMap<URL, Target>();
  // One abort listener per signal, not one per request.
  const inFlight = new WeakMap<AbortSignal, Set<Exchange>>();
  const tracked = (signal: AbortSignal): Set<Exchange> => {
    let set = inFlight.get(signal);
    if (!set) {
      const exchanges = new Set<Exchange>();
      set = exchanges;
      inFlight.set(signal, exchanges);
      signal.addEventListener(
        'abort',
        () => {
          for (const exchange of [...exchanges]) pool.cancel(exchange, 'stopped');
        },
        { once: true },
      );
    }
    return set;
  };

  function send(url: URL, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.resolve({ ok: false, error: 'unsupported URL scheme' });
    if (!options.allowPrivate) {
      const literal = ipLiteral(url.hostname);
      const kind = literal && nonPublicKind(literal);
      if (kind) return Promise.resolve({ ok: false, error: `${literal} is ${aKind(kind)} address; refused` });
    }
    if (signal?.aborted) return Promise.resolve({ ok: false, error: 'stopped' });
    let target = targets.get(url);
    if (!target) {
      target = targetOf(url);
      targets.set(url, target);
    }
    let head = target.prefix;
    for (const name in headers) {
      const value = headers[name]!;
      if (UNSAFE_HEADER_VALUE.test(value)) return Promise.resolve({ ok: false, error: `header ${name} has a line break` });
      head += `${name}: ${value}\r\n`;
    }
    head += `content-length: ${Buffer.byteLength(body, 'utf8')}\r\nuser-agent: ${USER_AGENT}\r\nconnection: keep-alive\r\n\r\n`;
    const exchanges = signal ? tracked(signal) : undefined;
    const origin = target.origin;
    return new Promise<SendResult>((resolve) => {
      const exchange = new Exchange(origin, head + body, maxBytes, (result: Http1Result) => {
        clearTimeout(timer);
        exchanges?.delete(exchange);
        resolve(toSendResult(result));
      });
      const timer = setTimeout(() => pool.cancel(exchange, `timed out after ${options.timeoutMs} ms`), options.timeoutMs);
      exchanges?.add(exchange);
      pool.dispatch(exchange);
    });
  }

  return {
    send,
    close() {
      pool.close();
    },
  };
}

/** Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3); undefined when it is neither. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  if (/^\d{1,10}$/.test(value)) return Number(value) * 1000;
  // An IMF-fixdate (or one of the obsolete forms Date.parse also reads); never a bare number.
  if (!/[a-z]/i.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function toSendResult(result: Http1Result): SendResult {
  if (result.error !== undefined) return { ok: false, error: result.error };
  const status = result.status;
  if (status >= 200 && status < 300) return { ok: true, status };
  const retryAfterMs = parseRetryAfter(result.retryAfter);
  const text = result.body
    .toString('utf8')
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim()
    .slice(0, 200);
  const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
  return { ok: false, status, error: `HTTP ${status}${redirect}${text ? `: ${text}` : ''}`, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
}
