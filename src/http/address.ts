import dns from 'node:dns';
import net from 'node:net';
import { TributaryError } from '../errors.ts';

/**
 * Which addresses Tributary will not connect to on a tenant's word (a webhook destination, a
 * customer-owned database server) unless the operator allows private ones: every block of IANA's IPv4 and IPv6 Special-Purpose
 * Address Registries that is not globally reachable, plus multicast, and IPv4 addresses
 * embedded in IPv6 (mapped, translated, compatible, NAT64, 6to4) by the IPv4 they carry.
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
    if ((value & mask) >>> 0 === (rule.base & mask) >>> 0) return rule.kind;
  }
  return undefined;
}

type V6Rule = { base: bigint; bits: number; kind: string };

const v6 = (cidr: string, kind: string): V6Rule => {
  const [address, bits] = cidr.split('/');
  return { base: v6Value(parseIpv6(address!)!), bits: Number(bits), kind };
};

const v6Value = (groups: number[]) => groups.reduce((n, g) => (n << 16n) | BigInt(g), 0n);

/**
 * IANA's IPv6 Special-Purpose Address Registry (2025), every block that is not globally
 * reachable, plus multicast and the deprecated site-local block. All of 2001::/23 (IETF
 * protocol assignments) is refused, the few anycast blocks in it that are reachable included:
 * no webhook has business there. Blocks that carry an IPv4 address are judged by it (below).
 */
const V6_RULES: V6Rule[] = [
  v6('::/128', 'unspecified'),
  v6('::1/128', 'loopback'),
  v6('64:ff9b:1::/48', 'private (local-use NAT64)'),
  v6('100::/64', 'discard'),
  v6('100:0:0:1::/64', 'dummy'),
  v6('2001::/32', 'Teredo'),
  v6('2001::/23', 'reserved (IETF protocol assignments)'),
  v6('2001:db8::/32', 'documentation'),
  v6('3fff::/20', 'documentation'),
  v6('5f00::/16', 'reserved (segment routing)'),
  v6('fc00::/7', 'private (unique local)'),
  v6('fe80::/10', 'link-local'),
  v6('fec0::/10', 'site-local'),
  v6('ff00::/8', 'multicast'),
];

/** Blocks whose last 32 bits (6to4: bits 16–47) are an IPv4 address, judged as that address. */
const V6_EMBEDDING: Array<{ rule: V6Rule; at: 'end' | '6to4' }> = [
  { rule: v6('::ffff:0:0/96', 'IPv4-mapped'), at: 'end' },
  { rule: v6('::ffff:0:0:0/96', 'IPv4-translated'), at: 'end' },
  { rule: v6('::/96', 'IPv4-compatible'), at: 'end' },
  { rule: v6('64:ff9b::/96', 'NAT64'), at: 'end' },
  { rule: v6('2002::/16', '6to4'), at: '6to4' },
];

const inBlock = (value: bigint, rule: V6Rule) => value >> BigInt(128 - rule.bits) === rule.base >> BigInt(128 - rule.bits);

function v6Kind(g: number[]): string | undefined {
  const value = v6Value(g);
  // The exact small blocks (::, ::1) before ::/96, which would read them as IPv4 0.0.0.x.
  for (const rule of V6_RULES.slice(0, 2)) if (inBlock(value, rule)) return rule.kind;
  for (const { rule, at } of V6_EMBEDDING) {
    if (!inBlock(value, rule)) continue;
    const four = at === 'end' ? Number(value & 0xffffffffn) : Number((value >> 80n) & 0xffffffffn);
    return v4Kind(four >>> 0);
  }
  for (const rule of V6_RULES) if (inBlock(value, rule)) return rule.kind;
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

/** "a loopback address", "an unspecified address": the article for a kind. */
export const aKind = (kind: string) => `${/^[aeiou]/.test(kind) ? 'an' : 'a'} ${kind}`;

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
    `url: ${host === address ? host : `${host} resolves to ${address}, which`} is ${aKind(kind)} address; webhook destinations must be ` +
      'public (the operator can allow private destinations with TRIBUTARY_WEBHOOK_ALLOW_PRIVATE=1)',
  );

/**
 * The addresses `host` (a name, or an IP literal with or without brackets) stands for. A name
 * that does not resolve, or resolves to nothing, throws an Error with `code` (the resolver's,
 * or ENOTFOUND).
 */
export async function addressesOf(host: string, lookup: LookupAll = systemLookup): Promise<string[]> {
  const literal = ipLiteral(host);
  const addresses = literal ? [literal] : (await lookup(host)).map((a) => a.address);
  if (addresses.length === 0) throw Object.assign(new Error(`${host} has no addresses`), { code: 'ENOTFOUND' });
  return addresses;
}

/** The first of `addresses` that is not public, with its kind; undefined when all are. */
export function firstNonPublic(addresses: string[]): { address: string; kind: string } | undefined {
  for (const address of addresses) {
    const kind = nonPublicKind(address);
    if (kind) return { address, kind };
  }
  return undefined;
}

/**
 * Checks that every address the URL's host resolves to is public. Throws a 422 naming
 * the first address that is not. Used when a destination is created; deliveries repeat
 * the check on every new connection (see pinnedLookup), since DNS answers change.
 */
export async function assertPublicDestination(url: URL, lookup: LookupAll = systemLookup): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let bad: { address: string; kind: string } | undefined;
  try {
    bad = firstNonPublic(await addressesOf(host, lookup));
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ENOTFOUND' && /has no addresses/.test((error as Error).message))
      throw new TributaryError('unprocessable', `url: the host ${host} has no addresses`);
    throw new TributaryError('unprocessable', `url: the host ${host} could not be resolved (${code ?? 'DNS error'})`);
  }
  if (bad) throw refusal(host, bad.address, bad.kind);
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
            bad ? `${hostname} resolves to ${bad.address}, ${aKind(nonPublicKind(bad.address) ?? '')} address; refused` : `${hostname} has no addresses`,
          );
          error.code = 'EPRIVATEADDRESS';
          callback(error, '');
          return;
        }
        const family = options.family === 4 || options.family === 6 ? options.family : undefined;
        const usable = family ? all.filter((a) => a.family === family) : all;
        if (options.all)
          callback(
            null,
            usable.map((a) => ({ address: a.address, family: a.family })),
          );
        else if (usable[0]) callback(null, usable[0].address, usable[0].family);
        else callback(Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }), '');
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}
