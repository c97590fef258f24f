import net from 'node:net';
import type pg from 'pg';
import { pinnedLookup } from '../http/address.ts';

/**
 * A customer-owned server's name was checked to resolve to public addresses when the sync was
 * made, but a name can be pointed elsewhere later (DNS rebinding: a metadata address, a private
 * range). A URL carrying this parameter is connected to only after each connection's own lookup
 * found public addresses alone. Tenants cannot set it: a database_url with any parameter but
 * sslmode is refused, and the parameter never reaches PostgreSQL.
 */
const PUBLIC_ONLY = 'tributary_public_only';

/** `url`, to be connected to only at public addresses. */
export function publicOnly(url: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set(PUBLIC_ONLY, '1');
  return parsed.toString();
}

/** `url` without the mark: the form handed to users. */
export function unmarked(url: string): string {
  const parsed = new URL(url);
  if (!parsed.searchParams.has(PUBLIC_ONLY)) return url;
  parsed.searchParams.delete(PUBLIC_ONLY);
  return parsed.toString();
}

/** A socket whose connect() resolves the host itself, refusing non-public addresses. */
class PublicOnlySocket extends net.Socket {
  override connect(...args: unknown[]): this {
    const [port, host] = args;
    if (typeof port === 'number' || typeof port === 'string') {
      return super.connect({ port: Number(port), host: typeof host === 'string' ? host : 'localhost', lookup: pinnedLookup() });
    }
    return super.connect(...(args as Parameters<net.Socket['connect']>));
  }
}

/**
 * A new connection to a sync database not made in this long fails. Over a path that hangs
 * without closing, a connect waits for the server's greeting with no end, and a connection
 * caught so stays dead after the path heals: a pool's slots filled with them one by one, and
 * the sync wrote nothing more (sync.hung-path.test).
 */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * A statement against a sync database unanswered this long fails, and its connection is not
 * used again. Over a path that hangs without closing, a statement (or a connection idle in a
 * pool when the path died) would wait as long as TCP retries, about a quarter of an hour.
 * Generous: a rebuild's COPY or index of a large table may take minutes.
 */
export const SYNC_DB_QUERY_TIMEOUT_MS = 5 * 60_000;

/**
 * The pg connection settings for a URL, with the connect deadline: the mark, if any, becomes a
 * socket that checks its addresses.
 */
export function connectionConfig(url: string): Pick<pg.ClientConfig, 'connectionString' | 'stream' | 'connectionTimeoutMillis'> {
  const plain = unmarked(url);
  if (plain === url) return { connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS };
  return { connectionString: plain, stream: () => new PublicOnlySocket(), connectionTimeoutMillis: CONNECT_TIMEOUT_MS };
}
