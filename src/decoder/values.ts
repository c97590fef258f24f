/**
 * Column text as pgoutput sends it → the natural JSON value an event carries: numbers,
 * booleans, arrays, objects, ISO timestamps. The replication session runs with
 * TimeZone=UTC and DateStyle=ISO (stream.ts), so timestamps arrive as
 * `2024-05-01 12:00:00.5+00`.
 */

type Convert = (text: string) => unknown;

const asText: Convert = (text) => text;
/**
 * pgoutput prints a boolean `t`/`f`, but a rebuild's differences (writer/swap.ts) come as
 * `column::text`, and the cast to text spells it `true`/`false`: both are read here.
 */
const asBoolean: Convert = (text) => text === 't' || text === 'true';
/** bigint and numeric become numbers while that is exact enough; else they stay text. */
const asNumber: Convert = (text) => {
  const value = Number(text);
  if (!Number.isFinite(value)) return text; // NaN, Infinity
  if (Number.isSafeInteger(value) || !/^-?\d+$/.test(text)) return value;
  return text; // an integer past 2^53 would silently change
};
const asJson: Convert = (text) => JSON.parse(text) as unknown;
const UTC_TIMESTAMP = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\+00$/;
/**
 * The common case by hand (this runs for every timestamp of every event): a UTC timestamp as
 * ISO text, `2024-05-01 12:00:00.5+00` → `2024-05-01T12:00:00.500Z`. Cut by position once the
 * pattern holds (a regular expression's captures cost more than the test).
 */
function utcIso(text: string): string | undefined {
  if (!UTC_TIMESTAMP.test(text)) return undefined;
  const fraction = text.length === 22 ? '000' : text.length >= 26 ? text.slice(20, 23) : text.slice(20, text.length - 3).padEnd(3, '0');
  return `${text.slice(0, 10)}T${text.slice(11, 19)}.${fraction}Z`;
}
const asTimestamptz: Convert = (text) => {
  // The rest through Date.
  const iso = utcIso(text);
  if (iso !== undefined) return iso;
  if (text === 'infinity' || text === '-infinity') return text;
  // `2024-05-01 12:00:00.5+00` → `2024-05-01T12:00:00.500Z`
  const date = new Date(`${text.replace(' ', 'T')}${/[+-]\d\d$/.test(text) ? ':00' : ''}`);
  return Number.isNaN(date.getTime()) ? text : date.toISOString();
};
const asTimestamp: Convert = (text) => text.replace(' ', 'T');

/** One-dimensional array literal `{a,"b c",NULL}` → elements, each converted. */
export function parseArray(text: string, element: Convert): unknown[] | string {
  if (text.length < 2 || text[0] !== '{') return text; // e.g. `[1:2]={…}` bounds: keep as given
  const out: unknown[] = [];
  let i = 1;
  if (text[1] === '}') return out;
  while (i < text.length) {
    if (text[i] === '"') {
      let value = '';
      i++;
      while (text[i] !== '"') {
        if (text[i] === '\\') i++;
        value += text[i++];
      }
      i++; // closing quote
      out.push(element(value));
    } else {
      let end = i;
      while (text[end] !== ',' && text[end] !== '}') end++;
      const raw = text.slice(i, end);
      if (raw.startsWith('{')) return text; // nested arrays: not made by Tributary; keep the text
      out.push(raw === 'NULL' ? null : element(raw));
      i = end;
    }
    i++; // ',' or '}'
  }
  return out;
}

const arrayOf =
  (element: Convert): Convert =>
  (text) =>
    parseArray(text, element);

const BY_OID = new Map<number, Convert>([
  [16, asBoolean],
  [20, asNumber],
  [21, asNumber],
  [23, asNumber],
  [26, asNumber],
  [700, asNumber],
  [701, asNumber],
  [1700, asNumber],
  [114, asJson],
  [3802, asJson],
  [1184, asTimestamptz],
  [1114, asTimestamp],
  [1000, arrayOf(asBoolean)],
  [1005, arrayOf(asNumber)],
  [1007, arrayOf(asNumber)],
  [1016, arrayOf(asNumber)],
  [1021, arrayOf(asNumber)],
  [1022, arrayOf(asNumber)],
  [1231, arrayOf(asNumber)],
  [1009, arrayOf(asText)],
  [1015, arrayOf(asText)],
  [1182, arrayOf(asText)],
  [1185, arrayOf(asTimestamptz)],
  [1115, arrayOf(asTimestamp)],
  [199, arrayOf(asJson)],
  [3807, arrayOf(asJson)],
]);

/** The converter of a column type; text, date, uuid, interval and the rest stay text. */
export function converterFor(typeOid: number): Convert {
  return BY_OID.get(typeOid) ?? asText;
}

/** Column text → the JSON text of its natural value, without building the value where the text already is JSON. */
type ToJson = (text: string) => string;

const quoted: ToJson = (text) => JSON.stringify(text);
const viaValue =
  (convert: Convert): ToJson =>
  (text) =>
    JSON.stringify(convert(text));
/** Integers print as JSON already; only those past 2^53 become strings (see asNumber). */
const integerJson: ToJson = (text) => (text.length < 16 ? text : JSON.stringify(asNumber(text)));
const floatJson: ToJson = (text) => (/^-?\d/.test(text) && !text.includes('Infinity') ? text : JSON.stringify(text));

const JSON_BY_OID = new Map<number, ToJson>([
  [16, (text) => (asBoolean(text) ? 'true' : 'false')],
  [20, integerJson],
  [21, integerJson],
  [23, integerJson],
  [26, integerJson],
  [700, floatJson],
  [701, floatJson],
  // numeric: 13 and 13.0 are one value; printing through Number makes them one text too.
  [1700, viaValue(asNumber)],
  // PostgreSQL prints jsonb as compact JSON; json keeps its input's whitespace, raw newlines included.
  [114, (text) => JSON.stringify(JSON.parse(text))],
  [3802, (text) => text],
  // ISO text needs no escaping: quoted as it is.
  [
    1184,
    (text) => {
      const iso = utcIso(text);
      return iso === undefined ? JSON.stringify(asTimestamptz(text)) : `"${iso}"`;
    },
  ],
]);

/** The JSON-text converter of a column type (the same values as converterFor, as JSON). */
export function jsonFor(typeOid: number): ToJson {
  const direct = JSON_BY_OID.get(typeOid);
  if (direct) return direct;
  const convert = BY_OID.get(typeOid);
  return convert ? viaValue(convert) : quoted;
}
