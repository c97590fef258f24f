import type http from 'node:http';
import { TributaryError, type ErrorCode } from '../errors.ts';

/**
 * A proxy-originated refusal or failure. The body says the proxy sent it, so a client can
 * tell it from the upstream's own errors: `{"error":{"source":"proxy","code","message"}}`.
 */
export class ProxyError extends TributaryError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    options: { cause?: unknown } = {},
  ) {
    // Every proxy error is meant for the client: the message never carries request data beyond the path.
    super(code, message, { ...options, expose: true });
    this.name = 'ProxyError';
  }
}

export const refuse = (code: ErrorCode, message: string, headers?: Record<string, string>) => new ProxyError(code, message, headers);

/** Writes a proxy error, unless an answer has already begun (then the connection is cut). */
export function sendProxyError(res: http.ServerResponse, error: ProxyError | TributaryError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = Buffer.from(JSON.stringify({ error: { source: 'proxy', code: error.code, message: error.message } }));
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': body.length,
    ...(error instanceof ProxyError ? error.headers : {}),
  };
  // A refused request may still have an unread body: close rather than parse what follows it.
  if (error.status === 400 || error.status === 413) headers.connection = 'close';
  res.writeHead(error.status, headers);
  res.end(body);
}
