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

/** The pg connection settings for a URL: the mark, if any, becomes a socket that checks its addresses. */
export function connectionConfig(url: string): Pick<pg.ClientConfig, 'connectionString' | 'stream'> {
  const plain = unmarked(url);
  if (plain === url) return { connectionString: url };
  return { connectionString: plain, stream: () => new PublicOnlySocket() };
}
