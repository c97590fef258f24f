import type { IncomingMessage, ServerResponse } from 'node:http';

export const MAX_BODY_BYTES = 2 * 1024 * 1024;
export const JSON_TYPE = 'application/json; charset=utf-8';

/** Reads the whole body; null when it exceeds the limit (the rest is drained, not buffered). */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) tooLarge = true;
      if (!tooLarge) chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? null : Buffer.concat(chunks)));
    req.on('error', () => resolve(tooLarge ? null : Buffer.concat(chunks)));
  });
}

/** The request's method and URL; an unparseable URL becomes `/`, which no route answers. */
export function requestLine(req: IncomingMessage): { method: string; url: URL } {
  const method = (req.method ?? 'GET').toUpperCase();
  try {
    return { method, url: new URL(req.url ?? '/', 'http://fake.invalid') };
  } catch {
    return { method, url: new URL('http://fake.invalid/') };
  }
}

export interface SendOptions {
  /** Fault injection: headers promise the full body, half arrives, the socket dies. */
  truncate?: boolean;
  close?: boolean;
  /** Extra response headers (request ids, API versions). */
  headers?: Record<string, string>;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, opts: SendOptions = {}): void {
  if (res.headersSent || res.destroyed) return;
  const payload = Buffer.from(JSON.stringify(body));
  res.statusCode = status;
  res.setHeader('content-type', JSON_TYPE);
  res.setHeader('content-length', payload.length);
  if (opts.close) res.setHeader('connection', 'close');
  for (const [name, value] of Object.entries(opts.headers ?? {})) res.setHeader(name, value);
  if (opts.truncate) {
    res.write(payload.subarray(0, Math.floor(payload.length / 2)), () => res.socket?.destroy());
    return;
  }
  res.end(payload);
}
