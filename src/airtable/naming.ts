/**
 * Upstream names → PostgreSQL names: snake_case, emoji and punctuation
 * removed. Clashes are settled by upstream id order, so a name never moves from one
 * field to another between cycles just because fields were reordered upstream.
 */

const MAX_IDENTIFIER_BYTES = 63;

export function snakeCase(name: string): string {
  const words = name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '') // accents: "Café" → "Cafe"
    // Break camelCase and letter/digit runs into words, as people read them.
    .replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2')
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, '$1 $2')
    .toLowerCase()
    // Keep letters and digits of any script; everything else (emoji, punctuation) separates words.
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);
  return truncate(words.join('_'));
}

function truncate(name: string, reserve = 0): string {
  let out = name;
  while (Buffer.byteLength(out) > MAX_IDENTIFIER_BYTES - reserve) out = out.slice(0, -1);
  return out.replace(/_+$/, '');
}

export interface Named {
  id: string;
  name: string;
}

/**
 * Assigns each item a unique snake_case name. `reserved` names (like `id` on a table)
 * get an underscore appended; an empty result falls back to a name
 * built from the upstream id; later clashes get `_2`, `_3`, … in id order.
 */
export function assignNames(items: Named[], options: { reserved?: string[]; fallbackPrefix: string }): Map<string, string> {
  const reserved = new Set(options.reserved ?? []);
  const taken = new Set(reserved);
  const result = new Map<string, string>();
  const byId = [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const wanted = new Map<string, string>();
  for (const item of byId) {
    let base = snakeCase(item.name) || `${options.fallbackPrefix}_${item.id.toLowerCase()}`;
    if (reserved.has(base)) base = `${base}_`;
    wanted.set(item.id, base);
  }
  for (const item of byId) {
    const base = wanted.get(item.id)!;
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${truncate(base, String(n).length + 1)}_${n}`;
    taken.add(name);
    result.set(item.id, name);
  }
  return result;
}
