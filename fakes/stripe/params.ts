/**
 * Checks decoded parameters against the endpoint's schema from Stripe's spec and types them:
 * unknown names, missing required ones, bad integers, booleans and enum values fail the way
 * Stripe fails them. Accepts the raw strings of a form as well as typed values from the
 * in-process control API.
 */
import { invalidRequest, missingParam, StripeApiError, unknownParam } from './errors.ts';
import type { RawValue } from './form.ts';
import type { ParamSchema } from './spec/index.ts';

export type Value = string | number | boolean | null | Value[] | { [key: string]: Value };
export type Params = { [key: string]: Value };

/** What callers may hand the control API: typed values, possibly with undefined holes. */
export type Input = RawValue | number | boolean | null | undefined | Input[] | { [key: string]: Input };

const isNode = (v: unknown): v is Record<string, Input> => typeof v === 'object' && v !== null && !Array.isArray(v);

function describe(v: Input): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function oneOf(values: string[]): string {
  const shown = values.filter((v) => v !== '');
  if (shown.length <= 1) return shown.join('');
  return `${shown.slice(0, -1).join(', ')}, or ${shown[shown.length - 1]}`;
}

function validateScalar(schema: ParamSchema, v: Input, name: string): Value {
  if (schema === 's' || (typeof schema === 'object' && 's' in schema)) {
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (typeof v !== 'string') throw invalidRequest(`Invalid string: ${describe(v)}`, { param: name });
    const max = typeof schema === 'object' ? schema.s : 5000;
    if (v.length > max) throw invalidRequest(`Invalid string: ${v.slice(0, 20)}...; must be at most ${max} characters`, { param: name });
    return v;
  }
  if (schema === 'i') {
    if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
    if (typeof v === 'string' && /^-?\d{1,16}$/.test(v)) return Number(v);
    throw invalidRequest(`Invalid integer: ${describe(v)}`, { code: 'parameter_invalid_integer', param: name });
  }
  if (schema === 'n') {
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    if (typeof v === 'string' && /^-?(\d+\.?\d*|\.\d+)$/.test(v)) return Number(v);
    throw invalidRequest(`Invalid decimal: ${describe(v)}`, { param: name });
  }
  if (schema === 'b') {
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    throw invalidRequest(`Invalid boolean: ${describe(v)}`, { param: name });
  }
  if (typeof schema === 'object' && 'e' in schema) {
    const text = typeof v === 'number' || typeof v === 'boolean' ? String(v) : v;
    if (typeof text === 'string' && schema.e.includes(text)) return text;
    throw invalidRequest(`Invalid ${name}: must be one of ${oneOf(schema.e)}`, { param: name });
  }
  throw new Error(`not a scalar schema: ${JSON.stringify(schema)}`);
}

function isScalarSchema(s: ParamSchema): boolean {
  return s === 's' || s === 'i' || s === 'n' || s === 'b' || (typeof s === 'object' && ('e' in s || 's' in s));
}

function validateArray(item: ParamSchema, v: Input, name: string): Value[] {
  let entries: Array<[number, Input]>;
  if (Array.isArray(v)) entries = v.map((x, i) => [i, x]);
  else if (isNode(v) && Object.keys(v).every((k) => /^\d+$/.test(k))) {
    entries = Object.entries(v).map(([k, x]) => [Number(k), x] as [number, Input]);
    entries.sort((a, b) => a[0] - b[0]);
  } else throw invalidRequest('Invalid array', { param: name });
  const out: Value[] = [];
  for (const [i, x] of entries) if (x !== undefined) out.push(validate(item, x, `${name}[${i}]`));
  return out;
}

function validateObject(schema: { o: Record<string, ParamSchema>; r?: string[] }, v: Input, name: string | undefined): Params {
  if (!isNode(v)) throw invalidRequest('Invalid hash', name ? { param: name } : {});
  const out: Params = {};
  const nameOf = (k: string) => (name ? `${name}[${k}]` : k);
  for (const [k, x] of Object.entries(v)) {
    if (x === undefined) continue;
    const sub = schema.o[k];
    if (!sub) throw unknownParam(nameOf(k));
    out[k] = validate(sub, x, nameOf(k));
  }
  for (const k of schema.r ?? []) if (!(k in out)) throw missingParam(nameOf(k));
  return out;
}

/** Types `v` by `schema`; `name` is the bracketed parameter name used in error messages. */
export function validate(schema: ParamSchema, v: Input, name: string): Value {
  if (v === null) return '';
  if (schema === 'x') return v as Value;
  if (typeof schema === 'object' && 'u' in schema) return validateUnion(schema.u, v, name);
  if (typeof schema === 'object' && 'a' in schema) return validateArray(schema.a, v, name);
  if (typeof schema === 'object' && 'o' in schema) return validateObject(schema, v, name);
  if (typeof schema === 'object' && 'm' in schema) {
    if (!isNode(v)) throw invalidRequest('Invalid hash', { param: name });
    const out: Params = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = validate(schema.m, x, `${name}[${k}]`);
    return out;
  }
  return validateScalar(schema, v, name);
}

function validateUnion(options: ParamSchema[], v: Input, name: string): Value {
  const structured = typeof v === 'object' && v !== null;
  const candidates = options.filter((s) => (structured ? !isScalarSchema(s) : isScalarSchema(s) || s === 'x'));
  if (candidates.length === 0) throw invalidRequest(structured ? `Invalid string: ${describe(v)}` : 'Invalid hash', { param: name });
  // Exact enum matches first, so '' means "unset" rather than an empty string.
  const isEnum = (s: ParamSchema) => typeof s === 'object' && 'e' in s;
  const ordered = [...candidates.filter(isEnum), ...candidates.filter((s) => !isEnum(s))];
  let best: StripeApiError | undefined;
  let bestIsBlank = true;
  for (const s of ordered) {
    try {
      return validate(s, v, name);
    } catch (e) {
      if (!(e instanceof StripeApiError)) throw e;
      // Report what the intended alternative said, not the "empty string unsets" enum.
      const blank = typeof s === 'object' && 'e' in s && s.e.length === 1 && s.e[0] === '';
      if (!best || (bestIsBlank && !blank)) {
        best = e;
        bestIsBlank = blank;
      }
    }
  }
  throw best as StripeApiError;
}

/** Validates a whole request's parameters against an endpoint schema (always an object schema). */
export function validateParams(schema: ParamSchema | undefined, raw: Record<string, Input>): Params {
  if (!schema || typeof schema !== 'object' || !('o' in schema)) {
    const first = Object.keys(raw)[0];
    if (first !== undefined) throw unknownParam(first);
    return {};
  }
  return validateObject(schema, raw, undefined);
}
