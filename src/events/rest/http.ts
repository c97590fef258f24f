import type http from 'node:http';
import { TributaryError, toError } from '../../errors.ts';
import { AWAY_RETRY_AFTER_S, databaseAway } from '../../db/transient.ts';
import { refuseNulInJson } from '../../http/nul.ts';
import type { Logger } from '../../log.ts';

/**
 * Reads the whole body, refusing more than `maxBytes`. The content type is not checked:
 * Upstash's own examples send JSON with curl's default form type (`curl -d '{…}'`).
 */
export function readBody(req: http.IncomingMessage, maxBytes: number): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    return Promise.reject(tooLarge(maxBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (error: Error | undefined, body?: string) => {
      if (settled) return;
      settled = true;
      req.off('data', onData).off('end', onEnd).off('error', onError);
      if (error) reject(error);
      else resolve(body ?? '');
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        // Stop reading; the answer says Connection: close, so the rest is never waited for.
        req.pause();
        settle(tooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle(undefined, Buffer.concat(chunks).toString('utf8'));
    const onError = (err: Error) => settle(new TributaryError('invalid_request', 'the request body could not be read', { cause: err }));
    req.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

const tooLarge = (maxBytes: number) => new TributaryError('payload_too_large', `the request body is larger than ${maxBytes} bytes`);

/** The body as JSON; an empty body is `undefined`. */
export function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    throw new TributaryError('invalid_json', 'the request body is not valid JSON');
  }
  refuseNulInJson(value);
  return value;
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/**
 * Errors answer `{"error","status"}` (the Upstash shape). Only errors marked `expose` show
 * their message; anything else is logged and answers a bare 500.
 */
export function sendError(res: http.ServerResponse, thrown: unknown, logger: Logger, request: { method?: string; path: string }): void {
  const away = databaseAway(thrown);
  if (away)
    logger.warn(
      { method: request.method, path: request.path, error: (thrown as Error).message },
      'event REST request answered 503: a database it needs is away',
    );
  const error = away ?? toError(thrown);
  if (error instanceof TributaryError && error.expose) {
    const headers: Record<string, string> = {};
    if (error.status === 401) headers['www-authenticate'] = 'Basic realm="tributary events", charset="UTF-8"';
    if (error.status === 413) headers.connection = 'close';
    if (error.retryAfterSeconds !== undefined) headers['retry-after'] = String(error.retryAfterSeconds);
    else if (error.status === 503) headers['retry-after'] = String(AWAY_RETRY_AFTER_S); // every 503 says when to try again
    const allow = (error as { allow?: string[] }).allow;
    if (error.status === 405 && allow) headers.allow = allow.join(', ');
    sendJson(res, error.status, { error: error.message, status: error.status }, headers);
    return;
  }
  logger.error({ err: error, method: request.method, path: request.path }, 'event REST request failed');
  sendJson(res, 500, { error: 'internal error; see the service log', status: 500 });
}

/** A 405 that carries the methods the path takes, for the Allow header. */
export function methodNotAllowed(method: string, path: string, allow: string[]): TributaryError {
  const error = new TributaryError('method_not_allowed', `${method} is not allowed on ${path}; use ${allow.join(' or ')}`);
  return Object.assign(error, { allow });
}

export const SUCCESS = { result: 'Success', status: 200 } as const;
