import type http from 'node:http';
import { sessionCookieName } from '../api/auth.ts';
import { refuse } from './errors.ts';

/** Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection and are never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

/** The proxy's own request header: read by the proxy, never sent upstream. */
export const TRANSLATE_HEADER = 'svc-translate';

/** Methods the upstream APIs use; anything else (TRACE, CONNECT, WebDAV…) is refused. */
export const ALLOWED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[\u0000\r\n]/;

/** The headers the Connection header names: hop-by-hop for this message too. */
function connectionListed(rawHeaders: string[]): Set<string> {
  const listed = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'connection') continue;
    for (const name of rawHeaders[i + 1]!.split(',')) if (name.trim()) listed.add(name.trim().toLowerCase());
  }
  return listed;
}

function isHopByHop(name: string, listed: Set<string>): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith('proxy-') || listed.has(name);
}

/**
 * Request smuggling and malformed framing, refused before anything is forwarded. Node's
 * parser already rejects most of it (both Content-Length and Transfer-Encoding, differing
 * duplicate lengths, bad characters); these checks hold whatever the parser lets through.
 */
export function checkRequestHeaders(req: http.IncomingMessage): void {
  const raw = req.rawHeaders;
  let lengths = 0;
  let encodings = 0;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    if (!TOKEN.test(name)) throw refuse('invalid_request', 'invalid header name');
    if (BAD_VALUE.test(value)) throw refuse('invalid_request', `invalid characters in header ${name}`);
    const lower = name.toLowerCase();
    if (lower === 'content-length') {
      lengths++;
      if (!/^\d{1,15}$/.test(value.trim())) throw refuse('invalid_request', 'Content-Length must be a decimal number');
    } else if (lower === 'transfer-encoding') {
      encodings++;
      if (value.trim().toLowerCase() !== 'chunked') throw refuse('invalid_request', 'only Transfer-Encoding: chunked is accepted');
    } else if (lower === 'host') hosts++;
  }
  if (lengths > 1) throw refuse('invalid_request', 'more than one Content-Length header');
  if (encodings > 1) throw refuse('invalid_request', 'more than one Transfer-Encoding header');
  if (lengths > 0 && encodings > 0) throw refuse('invalid_request', 'Content-Length and Transfer-Encoding together are refused (request smuggling)');
  if (hosts > 1) throw refuse('invalid_request', 'more than one Host header');
}

/** The console's session cookies: a browser sends them to the proxy too (cookies ignore ports). */
const SESSION_COOKIES = new Set([sessionCookieName(true), sessionCookieName(false)]);

/** A Cookie header without Tributary's own session; undefined when nothing else is left. */
function withoutSessionCookie(value: string): string | undefined {
  const kept = value
    .split(';')
    .map((pair) => pair.trim())
    .filter((pair) => pair && !SESSION_COOKIES.has(pair.split('=')[0]!.trim()));
  return kept.length > 0 ? kept.join('; ') : undefined;
}

/**
 * The client's headers as the upstream gets them, names and order kept (rawHeaders form):
 * hop-by-hop ones dropped, Host set to the upstream's, the proxy's own header and the
 * console's session cookie removed (a session must never reach a third party).
 * `contentLength` replaces the client's when the body was rewritten (translation).
 */
export function upstreamRequestHeaders(req: http.IncomingMessage, host: string, contentLength?: number): string[] {
  const raw = req.rawHeaders;
  const listed = connectionListed(raw);
  const out: string[] = ['Host', host];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    // Expect: 100-continue was answered by this server already.
    if (lower === 'host' || lower === TRANSLATE_HEADER || lower === 'expect' || isHopByHop(lower, listed)) continue;
    if (lower === 'content-length' && contentLength !== undefined) continue;
    if (lower === 'cookie') {
      const cookie = withoutSessionCookie(raw[i + 1]!);
      if (cookie !== undefined) out.push(name, cookie);
      continue;
    }
    out.push(name, raw[i + 1]!);
  }
  if (contentLength !== undefined) out.push('Content-Length', String(contentLength));
  return out;
}

/** The upstream's answer headers for the client: everything but hop-by-hop ones. */
export function clientResponseHeaders(rawHeaders: string[]): string[] {
  const listed = connectionListed(rawHeaders);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (isHopByHop(rawHeaders[i]!.toLowerCase(), listed)) continue;
    out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}

/** One header's value (the first, if repeated). */
export function headerOf(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
