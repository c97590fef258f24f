import { upstreamBase } from '../upstream/http.ts';
import { refuse } from './errors.ts';

/**
 * The only hosts the proxy forwards to (the registered kinds'): it is never an open proxy.
 * Bare upstream paths, for clients without a base-path option (stripe-node), are routed by
 * their first segment (`v0`, `v1`).
 */
export interface ProxyHosts {
  hosts: string[];
  byPrefix: Map<string, string>;
}

export interface ProxyRoute {
  host: string;
  /** The upstream path exactly as the client wrote it (still percent-encoded), starting with `/`. */
  path: string;
  /** The raw query without `?`, or '' when there was none. */
  query: string;
  hasQuery: boolean;
}

/** Where an upstream host is reached: TRIBUTARY_UPSTREAMS may point it at a local fake. */
export interface UpstreamTarget {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number;
  /** The Host header the upstream expects. */
  host: string;
}

export function upstreamTarget(upstreams: Map<string, string>, host: string): UpstreamTarget {
  const url = new URL(upstreamBase(upstreams, host));
  const protocol = url.protocol === 'http:' ? 'http:' : 'https:';
  return {
    protocol,
    hostname: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port ? Number(url.port) : protocol === 'https:' ? 443 : 80,
    host: url.host,
  };
}

const CONTROL = /[\u0000-\u001f\u007f]/;
const short = (text: string) => (text.length > 80 ? `${text.slice(0, 80)}…` : text);

/**
 * Each path segment, decoded, may not climb (`.`, `..`, also when percent-encoded or hidden
 * behind an encoded slash), hold a backslash, or carry control characters. Encoded slashes
 * themselves stay allowed: airtable.js encodes a table named "A/B" as `A%2FB`.
 */
function checkSegments(path: string): void {
  if (path.includes('\\')) throw refuse('invalid_request', 'backslashes are not allowed in the path');
  for (const segment of path.split('/')) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      throw refuse('invalid_request', `malformed percent-encoding in path segment "${short(segment)}"`);
    }
    if (decoded.includes('\\')) throw refuse('invalid_request', 'backslashes are not allowed in the path');
    if (CONTROL.test(decoded)) throw refuse('invalid_request', 'control characters are not allowed in the path');
    if (decoded.split('/').some((piece) => piece === '.' || piece === '..')) {
      throw refuse('invalid_request', 'path traversal ("." or ".." segments) is not allowed');
    }
  }
}

/**
 * The request target → the upstream host and path. Only the origin form is accepted
 * (`/{upstream_host}/<path>` or a bare `/v0/…`, `/v1/…`); absolute URLs, authority forms,
 * `//host` and `user@host` tricks are refused, and nothing in the path can change the host.
 */
export function routeOf(target: string | undefined, known: ProxyHosts): ProxyRoute {
  const raw = target ?? '';
  if (!raw.startsWith('/')) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(raw)) {
      throw refuse('invalid_request', 'absolute-URL request targets are refused: this is not a forward proxy; send /{upstream_host}/{path}');
    }
    throw refuse('invalid_request', 'the request target must be a path: /{upstream_host}/{path}');
  }
  if (raw.startsWith('//')) throw refuse('invalid_request', 'the request target must start with /{upstream_host}/, not //');
  if (raw.includes('#')) throw refuse('invalid_request', 'fragments (#) are not allowed in the request target');
  const q = raw.indexOf('?');
  const pathPart = q < 0 ? raw : raw.slice(0, q);
  const query = q < 0 ? '' : raw.slice(q + 1);
  checkSegments(pathPart);

  const first = pathPart.slice(1).split('/')[0] ?? '';
  const byPrefix = known.byPrefix.get(first);
  if (byPrefix) return { host: byPrefix, path: pathPart, query, hasQuery: q >= 0 };
  if (first === '') throw refuse('not_found', `nothing here: send /{upstream_host}/{path}, with upstream_host ${known.hosts.join(' or ')}`);
  const host = first.toLowerCase();
  if (!known.hosts.includes(host)) {
    throw refuse('forbidden', `the proxy only forwards to ${known.hosts.join(' and ')}; "${short(first)}" is refused`);
  }
  const rest = pathPart.slice(1 + first.length);
  return { host, path: rest === '' ? '/' : rest, query, hasQuery: q >= 0 };
}

/** The path and query sent upstream. */
export const upstreamPathOf = (route: Pick<ProxyRoute, 'path' | 'query' | 'hasQuery'>) => (route.hasQuery ? `${route.path}?${route.query}` : route.path);
