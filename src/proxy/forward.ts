import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream';
import { ProxyError } from './errors.ts';
import type { UpstreamTarget } from './routing.ts';

export interface ForwarderOptions {
  /** Until the TCP connection to the upstream is up (504 past it). */
  connectTimeoutMs: number;
  /** From the end of the request until the answer's headers, and between chunks of its body (504 past it). */
  responseTimeoutMs: number;
  /** Upstream connections kept per host. */
  maxSockets?: number;
}

export interface UpstreamRequest {
  target: UpstreamTarget;
  /** The upstream host as clients name it (for messages; the target may be a local fake). */
  name: string;
  method: string;
  /** Path and query, exactly as they go upstream. */
  path: string;
  /** rawHeaders form: name, value, name, value… */
  headers: string[];
  /** A buffered body, the client's own stream (already size-limited), or none. */
  body: Buffer | Readable | undefined;
  /** Called once the whole request has been handed to the socket: when the upstream will count it. */
  onSent?: () => void;
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);
const CUT = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** A network failure → the proxy's 502, unless it is already a proxy error (a timeout, a body over the limit). */
function classify(error: Error & { code?: string }, name: string): ProxyError {
  if (error instanceof ProxyError) return error;
  const code = error.code ?? '';
  if (UNREACHABLE.has(code)) return new ProxyError('bad_gateway', `${name} could not be reached (${code})`, {}, { cause: error });
  if (CUT.has(code) || error.message === 'socket hang up') {
    return new ProxyError('bad_gateway', `${name} closed the connection without a complete answer`, {}, { cause: error });
  }
  if (code.startsWith('HPE_')) return new ProxyError('bad_gateway', `${name} sent an answer that is not valid HTTP`, {}, { cause: error });
  if (code.startsWith('ERR_TLS') || code.includes('CERT'))
    return new ProxyError('bad_gateway', `the TLS connection to ${name} failed (${code})`, {}, { cause: error });
  return new ProxyError('bad_gateway', `the request to ${name} failed`, {}, { cause: error });
}

/**
 * Sends requests upstream over kept-alive connections, with a connect timeout and a
 * response timeout (both 504), and no retries of its own except one: a request whose body
 * is in memory and whose reused connection turned out to be closed by the upstream before
 * it read anything goes again on a fresh connection (Node's documented pattern).
 */
export class Forwarder {
  private readonly agents: Record<'http:' | 'https:', http.Agent>;

  constructor(private readonly options: ForwarderOptions) {
    // Idle connections are dropped before the upstream's keep-alive timeout (Node's default 5 s) closes them under us.
    const agent = { keepAlive: true, maxSockets: options.maxSockets ?? 256, maxFreeSockets: 64, timeout: 4_000, scheduling: 'lifo' as const };
    this.agents = { 'http:': new http.Agent(agent), 'https:': new https.Agent(agent) };
  }

  async send(request: UpstreamRequest): Promise<http.IncomingMessage> {
    try {
      return await this.once(request);
    } catch (error) {
      const retry = (error as { retryable?: boolean }).retryable === true && !(request.body && !Buffer.isBuffer(request.body));
      if (!retry) throw classify(error as Error, request.name);
      try {
        return await this.once(request);
      } catch (again) {
        throw classify(again as Error, request.name);
      }
    }
  }

  private once(request: UpstreamRequest): Promise<http.IncomingMessage> {
    const { target } = request;
    return new Promise((resolve, reject) => {
      const req = (target.protocol === 'https:' ? https : http).request({
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        method: request.method,
        path: request.path,
        headers: request.headers,
        setHost: false,
        agent: this.agents[target.protocol],
      });
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const clear = () => {
        if (timer) clearTimeout(timer);
        timer = undefined;
      };
      const fail = (error: Error & { retryable?: boolean }) => {
        if (settled) return;
        settled = true;
        clear();
        if ((error as { code?: string }).code === 'ECONNRESET' && req.reusedSocket) error.retryable = true;
        req.destroy();
        reject(error);
      };
      req.on('socket', (socket) => {
        if (!socket.connecting) return;
        timer = setTimeout(
          () => fail(new ProxyError('gateway_timeout', `${request.name} could not be reached within ${this.options.connectTimeoutMs / 1000} s`)),
          this.options.connectTimeoutMs,
        );
        socket.once('connect', clear);
      });
      // The answer's clock starts once the whole request has gone.
      req.on('finish', () => {
        request.onSent?.();
        clear();
        timer = setTimeout(
          () => fail(new ProxyError('gateway_timeout', `${request.name} did not answer within ${this.options.responseTimeoutMs / 1000} s`)),
          this.options.responseTimeoutMs,
        );
      });
      req.on('response', (res) => {
        if (settled) {
          res.destroy();
          return;
        }
        settled = true;
        clear();
        resolve(res);
      });
      req.on('error', fail);
      const body = request.body;
      if (body === undefined) req.end();
      else if (Buffer.isBuffer(body)) req.end(body);
      else pipeline(body, req, (error) => error && fail(error));
    });
  }

  /** Cuts a stalled answer: no byte for the response timeout. One timer per answer, re-armed only when it fires early. */
  watchIdle(stream: Readable, onIdle: () => void): void {
    const limit = this.options.responseTimeoutMs;
    let last = Date.now();
    const check = () => {
      const idle = Date.now() - last;
      if (idle >= limit) onIdle();
      else timer = setTimeout(check, limit - idle);
    };
    let timer = setTimeout(check, limit);
    stream.on('data', () => (last = Date.now()));
    const stop = () => clearTimeout(timer);
    stream.once('close', stop);
    stream.once('end', stop);
  }

  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}
