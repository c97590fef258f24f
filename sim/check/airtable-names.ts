/**
 * The checker's own reading of the naming rules in docs/airtable.md ("Names") and the spec
 * ("Table (spreadsheet platform)"), written apart from src/airtable/naming.ts on purpose: a
 * naming bug in the product must not be able to agree with itself here.
 */

/** PostgreSQL's identifier limit, in bytes. */
const MAX_BYTES = 63;

/** Cut to 63 bytes on a character boundary; a cut that ends in `_` loses it (no trailing separator). */
function cut(name: string, bytes = MAX_BYTES): string {
  const chars = [...name];
  while (Buffer.byteLength(chars.join('')) > bytes) chars.pop();
  return chars.join('').replace(/_+$/, '');
}

/**
 * snake_case: accents folded, camelCase split into words, lower case, words joined by `_`;
 * anything that is not a letter or digit (of any script) separates words and is dropped.
 */
export function snakeName(upstream: string): string {
  const folded = upstream.normalize('NFKD').replace(/\p{M}+/gu, '');
  const words: string[] = [];
  for (const run of folded.split(/[^\p{L}\p{N}]+/u)) {
    if (!run) continue;
    // "dueDate" → due Date; "HTMLPage" → HTML Page: a word starts at an upper case letter that
    // follows a lower case one, or that starts a capitalised word after an acronym.
    const spaced = run.replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2').replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, '$1 $2');
    words.push(...spaced.split(' ').map((w) => w.toLowerCase()));
  }
  return cut(words.join('_'));
}

/**
 * Unique names for a table's fields (or a base's tables): snake_case; empty → `<prefix>_<id>`
 * (lower case, like every other name); a reserved name gets `_`; clashes get `_2`, `_3`, …
 * handed out in upstream-id order, the lowest id keeping the plain name.
 */
export function uniqueNames(items: Array<{ id: string; name: string }>, prefix: string, reserved: string[] = []): Map<string, string> {
  const taken = new Set(reserved);
  const out = new Map<string, string>();
  const inIdOrder = [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const wanted = new Map(
    inIdOrder.map((item) => {
      const name = snakeName(item.name) || `${prefix}_${item.id.toLowerCase()}`;
      return [item.id, reserved.includes(name) ? `${name}_` : name];
    }),
  );
  for (const item of inIdOrder) {
    const base = wanted.get(item.id)!;
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${cut(base, MAX_BYTES - `_${n}`.length)}_${n}`;
    taken.add(name);
    out.set(item.id, name);
  }
  return out;
}
