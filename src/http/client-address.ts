import net from 'node:net';
import { parseIpv6 } from './address.ts';

export interface ClientAddressInput {
  /** The socket's peer. */
  remoteAddress: string | undefined;
  /** The X-Forwarded-For header as received (Node joins repeated ones with commas). */
  forwardedFor: string | string[] | undefined;
  /** Reverse proxies in front of this server (Config.reverseProxies); 0 trusts no header. */
  reverseProxies: number;
}

/**
 * Who is asking, for per-client limits. The socket's peer, unless the operator says N reverse
 * proxies sit in front: then the Nth X-Forwarded-For entry from the right, the one the outermost
 * trusted proxy appended (entries further left are the client's own word). IPv6 clients are
 * counted by /64, since one subscriber commonly holds a whole /64.
 */
export function clientAddress(input: ClientAddressInput): string {
  const peer = normalized(input.remoteAddress ?? '') ?? 'unknown';
  if (input.reverseProxies < 1 || !input.forwardedFor) return peer;
  const entries = [input.forwardedFor]
    .flat()
    .join(',')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0) return peer;
  // Fewer entries than proxies: the leftmost was still appended by one of them.
  const entry = entries[Math.max(0, entries.length - input.reverseProxies)]!;
  return normalized(entry) ?? peer;
}

function normalized(address: string): string | undefined {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped && net.isIPv4(mapped[1]!)) return mapped[1]!;
  if (net.isIPv4(address)) return address;
  const groups = parseIpv6(address);
  if (!groups) return undefined;
  if (groups.every((g, i) => g === (i === 7 ? 1 : 0))) return '::1';
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}
