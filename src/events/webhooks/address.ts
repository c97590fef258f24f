import dns from 'node:dns';
import net from 'node:net';
import { TributaryError } from '../../errors.ts';

/**
 * Which addresses a webhook may not reach unless the operator allows private destinations
 * (TRIBUTARY_WEBHOOK_ALLOW_PRIVATE=1): loopback, private, link-local, shared (CGNAT),
 * multicast, reserved and unspecified ranges, in IPv4 and IPv6, and IPv4 addresses
 * embedded in IPv6 (mapped, compatible, NAT64, 6to4) by the IPv4 they carry.
 */

type V4Rule = { base: number; bits: number; kind: string };

const v4 = (cidr: string, kind: string): V4Rule => {
  const [address, bits] = cidr.split('/');
  return { base: parseIpv4(address!)!, bits: Number(bits), kind };
};

const V4_RULES: V4Rule[] = [
  v4('0.0.0.0/8', 'unspecified'),
  v4('10.0.0.0/8', 'private'),
  v4('100.64.0.0/10', 'shared (carrier-grade NAT)'),
  v4('127.0.0.0/8', 'loopback'),
  v4('169.254.0.0/16', 'link-local'),
  v4('172.16.0.0/12', 'private'),
  v4('192.0.0.0/24', 'reserved'),
  v4('192.0.2.0/24', 'documentation'),
  v4('192.88.99.0/24', 'reserved'),
  v4('192.168.0.0/16', 'private'),
  v4('198.18.0.0/15', 'benchmarking'),
  v4('198.51.100.0/24', 'documentation'),
  v4('203.0.113.0/24', 'documentation'),
  v4('224.0.0.0/4', 'multicast'),
  v4('240.0.0.0/4', 'reserved'),
];

/** A dotted-quad IPv4 address as an unsigned 32-bit number, or undefined. */
export function parseIpv4(text: string): number | undefined {
  if (!net.isIPv4(text)) return undefined;
  return text.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

/** An IPv6 address as eight 16-bit groups (a trailing dotted IPv4 allowed), or undefined. */
export function parseIpv6(text: string): number[] | undefined {
  const bare = text.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (!net.isIPv6(bare)) return undefined;
  let head = bare;
  const tail: number[] = [];
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (dotted) {
    const value = parseIpv4(dotted[2]!);
    if (value === undefined) return undefined;
    head = dotted[1]!.endsWith('::') ? dotted[1]! : dotted[1]!.slice(0, -1);
    tail.push(value >>> 16, value & 0xffff);
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const [left, right] = head.split('::') as [string, string | undefined];
  const start = groups(left);
  if (right === undefined) return [...start, ...tail];
  const end = [...groups(right), ...tail];
  return [...start, ...new Array<number>(8 - start.length - end.length).fill(0), ...end];
}

function v4Kind(value: number): string | undefined {
  if (value === 0xffffffff) return 'broadcast';
  for (const rule of V4_RULES) {
    const mask = rule.bits === 0 ? 0 : (~0 << (32 - rule.bits)) >>> 0;
    if (((value & mask) >>> 0) === ((rule.base & mask) >>> 0)) return rule.kind;
  }
  return undefined;
}

function v6Kind(g: number[]): string | undefined {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const embedded = (hi: number, lo: number) => v4Kind(((hi << 16) >>> 0) + lo);
  if (zeros(0, 8)) return 'unspecified';
  if (zeros(0, 7) && g[7] === 1) return 'loopback';
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated) carry an IPv4 address.
  if (zeros(0, 5) && (g[5] === 0xffff || g[5] === 0)) return embedded(g[6]!, g[7]!);
  // 64:ff9b::/96 (NAT64) likewise; 64:ff9b:1::/48 is local-use NAT64.
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return embedded(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private (local NAT64)';
  // 2002::/16 (6to4) carries the IPv4 address in groups 1 and 2.
  if (g[0] === 0x2002) return embedded(g[1]!, g[2]!);
  const first = g[0]!;
  if ((first & 0xfe00) === 0xfc00) return 'private (unique local)';
  if ((first & 0xffc0) === 0xfe80) return 'link-local';
  if ((first & 0xffc0) === 0xfec0) return 'site-local';
  if ((first & 0xff00) === 0xff00) return 'multicast';
  if (first === 0x100 && zeros(1, 4)) return 'discard';
  if (first === 0x2001 && g[1] === 0xdb8) return 'documentation';
  return undefined;
}

/**
 * Why `address` is not a public destination ("loopback", "private", …), or undefined when it is.
 * Anything that is not an IP address at all counts as not public.
 */
export function nonPublicKind(address: string): string | undefined {
  const four = parseIpv4(address);
  if (four !== undefined) return v4Kind(four);
  const six = parseIpv6(address);
  if (six) return v6Kind(six);
  return 'not an IP address';
}

export type LookupAll = (host: string) => Promise<Array<{ address: string; family: number }>>;

export const systemLookup: LookupAll = (host) => dns.promises.lookup(host, { all: true, verbatim: true });

/** The host of a URL as an IP literal (brackets removed), or undefined for a name. */
export function ipLiteral(hostname: string): string | undefined {
  const bare = hostname.replace(/^\[|\]$/g, '');
  return net.isIP(bare) ? bare : undefined;
}

const refusal = (host: string, address: string, kind: string) =>
  new TributaryError(
    'unprocessable',
    `url: ${host === address ? host : `${host} resolves to ${address}, which`} is a ${kind} address; webhook destinations must be ` +
      'public (the operator can allow private destinations with TRIBUTARY_WEBHOOK_ALLOW_PRIVATE=1)',
  );

/**
 * Checks that every address the URL's host resolves to is public. Throws a 422 naming
 * the first address that is not. Used when a destination is created; deliveries repeat
 * the check on every new connection (see pinnedLookup), since DNS answers change.
 */
export async function assertPublicDestination(url: URL, lookup: LookupAll = systemLookup): Promise<void> {
  const host = url.hostname;
  const literal = ipLiteral(host);
  let addresses: string[];
  if (literal) {
    addresses = [literal];
  } else {
    try {
      addresses = (await lookup(host)).map((a) => a.address);
    } catch (error) {
      throw new TributaryError('unprocessable', `url: the host ${host} could not be resolved (${(error as { code?: string }).code ?? 'DNS error'})`);
    }
    if (addresses.length === 0) throw new TributaryError('unprocessable', `url: the host ${host} has no addresses`);
  }
  for (const address of addresses) {
    const kind = nonPublicKind(address);
    if (kind) throw refusal(literal ?? host, address, kind);
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request that resolves the name, refuses the connection unless every
 * address is public, and then connects to one of the addresses it checked, so a DNS answer
 * that changes between the check and the connect (rebinding) cannot slip through.
 */
export function pinnedLookup(lookup: LookupAll = systemLookup) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    lookup(hostname).then(
      (all) => {
        const bad = all.find((a) => nonPublicKind(a.address));
        if (all.length === 0 || bad) {
          const error: NodeJS.ErrnoException = new Error(
            bad
              ? `${hostname} resolves to ${bad.address}, a ${nonPublicKind(bad.address)} address; refused`
              : `${hostname} has no addresses`,
          );
          error.code = 'EPRIVATEADDRESS';
          callback(error, '');
          return;
        }
        const family = options.family === 4 || options.family === 6 ? options.family : undefined;
        const usable = family ? all.filter((a) => a.family === family) : all;
        if (options.all) callback(null, usable.map((a) => ({ address: a.address, family: a.family })));
        else if (usable[0]) callback(null, usable[0].address, usable[0].family);
        else callback(Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }), '');
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}
