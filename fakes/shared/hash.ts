/** Small integer hashes: the seeded generators' only source of randomness. */

/** murmur3's finaliser: a bijection on 32-bit integers, so distinct inputs stay distinct. */
export function fmix32(x: number): number {
  let h = x | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Hash of a few integers (seed, table index, row, salt): the generator's only source of randomness. */
export function hash(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) h = fmix32(h ^ Math.imul(p | 0, 0x27d4eb2d) ^ (Math.floor(p / 4294967296) | 0));
  return h;
}

/** hash() for exactly four 32-bit parts, without the rest-argument array (hot in the generator). */
export function hash4(a: number, b: number, c: number, d: number): number {
  let h = fmix32(0x9e3779b9 ^ Math.imul(a | 0, 0x27d4eb2d));
  h = fmix32(h ^ Math.imul(b | 0, 0x27d4eb2d));
  h = fmix32(h ^ Math.imul(c | 0, 0x27d4eb2d));
  return fmix32(h ^ Math.imul(d | 0, 0x27d4eb2d));
}

export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return fmix32(h);
}
