import http from 'node:http';
import https from 'node:https';
import { toError } from '../../errors.ts';
import { ipLiteral, nonPublicKind, pinnedLookup, systemLookup, type LookupAll } from './address.ts';

/** What one POST came to. `status` is set when the receiver answered at all. */
export interface SendResult {
  ok: boolean;
  status?: number;
  /** A short, log-safe description of the failure. */
  error?: string;
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

/**
 * POSTs over keep-alive connections. Redirects are not followed (a 3xx is a failure),
 * response bodies are read only up to a bound, and unless private destinations are
 * allowed every new connection goes only to an address checked to be public.
 */
export function createSender(options: SenderOptions): Sender {
  const agentOptions = {
    keepAlive: true,
    maxSockets: options.maxSockets,
    maxFreeSockets: options.maxSockets,
    timeout: 60_000,
    scheduling: 'lifo' as const,
  };
  const lookup = options.allowPrivate ? undefined : pinnedLookup(options.lookup ?? systemLookup);
  const agents = { 'http:': new http.Agent(agentOptions), 'https:': new https.Agent(agentOptions) };
  const maxBytes = options.maxResponseBytes ?? 4096;

  function send(url: URL, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<SendResult> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.resolve({ ok: false, error: 'unsupported URL scheme' });
    if (!options.allowPrivate) {
      const literal = ipLiteral(url.hostname);
      const kind = literal && nonPublicKind(literal);
      if (kind) return Promise.resolve({ ok: false, error: `${literal} is a ${kind} address; refused` });
    }
    if (signal?.aborted) return Promise.resolve({ ok: false, error: 'stopped' });
    const payload = Buffer.from(body, 'utf8');
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      const finish = (result: SendResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(result);
      };
      const secure = url.protocol === 'https:';
      const request = (secure ? https : http).request(url, {
        method: 'POST',
        agent: secure ? agents['https:'] : agents['http:'],
        headers: { ...headers, 'content-length': String(payload.length), 'user-agent': USER_AGENT },
        ...(lookup ? { lookup } : {}),
      });
      const timer = setTimeout(() => {
        request.destroy();
        finish({ ok: false, error: `timed out after ${options.timeoutMs} ms` });
      }, options.timeoutMs);
      const onAbort = () => {
        request.destroy();
        finish({ ok: false, error: 'stopped' });
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      request.on('error', (error) => {
        const err = toError(error) as NodeJS.ErrnoException;
        finish({ ok: false, error: err.code ? `${err.code}: ${err.message}` : err.message });
      });
      request.on('response', (response) => {
        const status = response.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => {
          const ok = status >= 200 && status < 300;
          if (ok) return finish({ ok, status });
          const text = Buffer.concat(chunks).toString('utf8').replace(/[^\x20-\x7e]+/g, ' ').trim().slice(0, 200);
          const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
          finish({ ok, status, error: `HTTP ${status}${redirect}${text ? `: ${text}` : ''}` });
        };
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= maxBytes) chunks.push(chunk);
          else {
            // Enough: the rest is not read, and this connection is not reused.
            response.destroy();
            done();
          }
        });
        response.on('end', done);
        response.on('error', () => done());
        response.on('close', done);
      });
      request.end(payload);
    });
  }

  return {
    send,
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}
