import { TributaryError } from '../errors.ts';
import os from 'node:os';
import { addressesOf, aKind, firstNonPublic, type LookupAll, nonPublicKind, systemLookup } from '../http/address.ts';

/**
 * A sync's `database_url` names a customer-owned server that Tributary connects to on the
 * tenant's word, so it is held to the rules of a webhook destination and more: without them
 * it was a probe of the service's network (which ports answer, where a password works) and
 * of its file system (libpq-style parameters that read files or name socket directories).
 */
export interface ServerUrlPolicy {
  /** TRIBUTARY_DATABASE_ALLOW_PRIVATE=1: loopback and private servers are accepted. */
  allowPrivate: boolean;
  /** Tributary's own servers (control database, shared server): never a customer's. */
  ownServers: string[];
  lookup?: LookupAll;
}

/** The only query parameter accepted, and its values; every other one names a file, a socket or a host. */
const SSL_MODES = new Set(['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify']);

const refused = (message: string, field = 'database_url') => new TributaryError('unprocessable', `${field}: ${message}`);

/**
 * The URL's shape: postgres:// with a host and a port, sslmode the only parameter. `field`
 * names the field in the 400 (`database_url` of a sync, `url` of a pool server).
 */
export function parseServerUrl(value: string, field = 'database_url'): URL {
  const bad = (message: string) => new TributaryError('invalid_request', `${field}: ${message}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad('must be a postgres:// or postgresql:// URL');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw bad('must be a postgres:// or postgresql:// URL');
  const host = decodeURIComponent(url.hostname);
  if (!url.hostname || host.startsWith('/') || host.includes('/')) throw bad('must name a host (socket paths are not accepted)');
  if (!url.port) throw bad('must name the port (postgres://user:password@host:5432/postgres)');
  for (const [name, setting] of url.searchParams) {
    if (name !== 'sslmode') throw bad(`the parameter ${name} is not accepted; only sslmode is`);
    if (!SSL_MODES.has(setting)) throw bad(`sslmode must be one of ${[...SSL_MODES].join(', ')}`);
  }
  return url;
}

/**
 * Whether connecting to `address` reaches this machine: a loopback address, the unspecified
 * one (0.0.0.0 and :: are routed to the local host), or an address of one of its interfaces.
 */
function isThisMachine(address: string): boolean {
  const kind = nonPublicKind(address);
  if (kind === 'loopback' || kind === 'unspecified') return true;
  const bare = address.replace(/^::ffff:/i, '').toLowerCase();
  return Object.values(os.networkInterfaces()).some((list) => list?.some((i) => i.address.toLowerCase() === bare));
}

/** address:port for each of a server's addresses: what "the same server" means. */
function endpoints(addresses: string[], url: URL): string[] {
  const port = url.port || '5432';
  // Every way of reaching this machine is the same machine.
  return addresses.map((a) => `${isThisMachine(a) ? 'this machine' : a}:${port}`);
}

/** Where a server URL leads, as address:port pairs (none when its host does not resolve). */
export async function serverEndpoints(value: string, lookup: LookupAll = systemLookup): Promise<string[]> {
  const url = new URL(value);
  return endpoints(await addressesOf(url.hostname, lookup).catch(() => []), url);
}

/**
 * A pool server's URL, from the operator: its shape as a customer's (400 otherwise) and a host
 * that resolves (422 otherwise); answers its endpoints. Private and loopback addresses are
 * accepted, since the operator's servers are usually on a private network.
 */
export async function checkPoolServerUrl(value: string, lookup: LookupAll = systemLookup): Promise<string[]> {
  const url = parseServerUrl(value, 'url');
  try {
    return endpoints(await addressesOf(url.hostname, lookup), url);
  } catch {
    throw refused('unreachable (the host could not be resolved)', 'url');
  }
}

/**
 * Refuses a customer server URL that is malformed, that is one of Tributary's own servers, or
 * (unless the operator allows it) that resolves to a non-public address. Messages say what is
 * wrong with the URL and echo nothing learnt from connecting.
 */
export async function checkServerUrl(value: string, policy: ServerUrlPolicy): Promise<void> {
  const url = parseServerUrl(value);
  const lookup = policy.lookup ?? systemLookup;
  let addresses: string[];
  try {
    addresses = await addressesOf(url.hostname, lookup);
  } catch {
    throw refused('unreachable (the host could not be resolved)');
  }
  const own = await Promise.all(policy.ownServers.map((server) => serverEndpoints(server, lookup)));
  const mine = new Set(own.flat());
  if (endpoints(addresses, url).some((endpoint) => mine.has(endpoint))) {
    throw refused("names one of Tributary's own servers; leave database_url out to use the shared server");
  }
  const nonPublic = firstNonPublic(addresses);
  if (nonPublic && !policy.allowPrivate) {
    throw refused(
      `the host is ${aKind(nonPublic.kind)} address; customer-owned servers must be public (the operator can allow private ones with TRIBUTARY_DATABASE_ALLOW_PRIVATE=1)`,
    );
  }
}

/**
 * What a failed connection to a customer server says, from a short fixed list: never the
 * driver's message, which can echo what the server or the network answered.
 */
export function connectFailure(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : '';
  if (code === '28P01' || code === '28000') return 'authentication failed';
  if (code === '3D000') return 'the database in the URL does not exist';
  if (code === 'ECONNREFUSED') return 'refused (nothing accepts connections at that host and port)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'unreachable (the host could not be resolved)';
  if (code === 'EPRIVATEADDRESS') return 'refused (the host resolves to a non-public address)';
  if (code === 'ETIMEDOUT' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || /timeout/i.test(message)) return 'unreachable (no answer in time)';
  if (/ssl|tls|certificate/i.test(message) || (typeof code === 'string' && code.startsWith('ERR_TLS'))) return 'TLS failed';
  if (code === '53300' || code === '57P03') return 'the server accepts no connections now';
  return 'not a PostgreSQL server that answers (the connection ended unexpectedly)';
}

/**
 * At most `limit` database_url checks per account in `windowMs`: each one connects somewhere
 * on the tenant's word, so they are not a free scan.
 */
export class AttemptLimiter {
  private readonly attempts = new Map<string, number[]>();

  constructor(
    private readonly limit = 5,
    private readonly windowMs = 60_000,
  ) {}

  take(accountId: string, now = Date.now()): void {
    const recent = (this.attempts.get(accountId) ?? []).filter((at) => at > now - this.windowMs);
    if (recent.length >= this.limit) {
      const retry = Math.ceil((recent[0]! + this.windowMs - now) / 1000);
      throw new TributaryError('too_many_requests', `database_url: at most ${this.limit} servers checked a minute; retry in ${retry} s`);
    }
    recent.push(now);
    this.attempts.set(accountId, recent);
  }
}
