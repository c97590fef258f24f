/**
 * The committed slices of Stripe's OpenAPI spec (see extract.ts), loaded once. Read at runtime
 * rather than imported as code: half a megabyte of literal would slow the type checker for
 * nothing.
 */
import { readFileSync } from 'node:fs';

/**
 * A parameter's accepted shape: 's' string (or { s: maxLength }), 'i' integer, 'n' number,
 * 'b' boolean, 'x' anything; { e } one of these strings; { a } array of; { o, r } object with
 * these keys (r required); { m } map of free keys; { u } any one of.
 */
export type ParamSchema =
  | 's'
  | 'i'
  | 'n'
  | 'b'
  | 'x'
  | { s: number }
  | { e: string[] }
  | { a: ParamSchema }
  | { o: Record<string, ParamSchema>; r?: string[] }
  | { m: ParamSchema }
  | { u: ParamSchema[] };

export interface PathInfo {
  method: string;
  path: string;
  /** What a GET answers; writes are 'other'. */
  kind: 'list' | 'search' | 'object' | 'other';
  /** The `object` value of what it answers (of the list's items for lists). */
  object?: string;
}

export interface ObjectFields {
  /** Every field the spec defines. */
  props: string[];
  /** Fields the spec marks always present. */
  required: string[];
  /** Fields Stripe's own fixture shows, i.e. present in a default (unexpanded) answer. */
  defaults: string[];
}

function load<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(name, import.meta.url), 'utf8')) as T;
}

/** Loads a file the first time it is asked for. */
function lazy<T>(name: string): () => T {
  let value: T | undefined;
  return () => {
    if (value === undefined) value = load<T>(name);
    return value;
  };
}

const paramsData = lazy<{ version: string; params: Record<string, ParamSchema> }>('params.json');
const pathsData = lazy<{ version: string; paths: PathInfo[] }>('paths.json');
const objectsData = lazy<{ version: string; objects: Record<string, ObjectFields> }>('objects.json');

/** The API version the spec (and so the fake's object shapes) describes. */
export function specVersion(): string {
  return paramsData().version;
}

/** Parameters of `METHOD /v1/template`, or undefined when the spec has no such endpoint. */
export function endpointParams(method: string, template: string): ParamSchema | undefined {
  return paramsData().params[`${method} ${template}`];
}

export function specPaths(): PathInfo[] {
  return pathsData().paths;
}

export function objectFields(object: string): ObjectFields | undefined {
  return objectsData().objects[object];
}
