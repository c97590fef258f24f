/**
 * Extracts, for every object type the catalog lists, the kind of each of its fields as Stripe's
 * OpenAPI spec declares it, into sim/check/stripe-fields.json: the simulation's Stripe checker
 * types its expected columns from these facts with its own rules (docs/stripe.md), never from
 * the product's catalog types.
 *
 *   node --import tsx scripts/stripe-fields.ts [--spec <spec3.json>]
 *
 * Kinds: integer, unix-time, number, boolean, decimal, string, string[], reference (an id the
 * API expands on request), array (of anything but plain strings), object, polymorphic (several
 * shapes).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readSpec, stripeMockSpecPath, type OpenApiSpec } from './stripe-catalog.ts';

export const FIELDS_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'sim', 'check', 'stripe-fields.json');
const CATALOG_DATA = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'stripe', 'catalog.json');

interface Schema {
  type?: string;
  format?: string;
  $ref?: string;
  anyOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  'x-expansionResources'?: unknown;
}

export interface StripeFields {
  apiVersion: string;
  /** object type → field → kind, in the spec's order (`object` itself left out). */
  objects: Record<string, Record<string, string>>;
}

function kindOf(schemas: Record<string, Schema>, s: Schema): string {
  if (s['x-expansionResources'] && s.anyOf?.some((v) => v.type === 'string')) return 'reference';
  // `anyOf` with one member is how the spec writes "nullable X".
  if (s.anyOf) return s.anyOf.length === 1 ? kindOf(schemas, s.anyOf[0]!) : 'polymorphic';
  if (s.$ref) {
    const target = schemas[s.$ref.slice(s.$ref.lastIndexOf('/') + 1)] ?? {};
    return target.properties || !target.type ? 'object' : kindOf(schemas, target);
  }
  switch (s.type) {
    case 'integer':
      return s.format === 'unix-time' ? 'unix-time' : 'integer';
    case 'string':
      return s.format === 'decimal' ? 'decimal' : 'string';
    case 'number':
    case 'boolean':
      return s.type;
    case 'array':
      return s.items?.type === 'string' && !s.items.anyOf && !s.items.$ref ? 'string[]' : 'array';
    default:
      return 'object';
  }
}

export function extractFields(spec: OpenApiSpec, objects: string[]): StripeFields {
  const schemas = spec.components.schemas as Record<string, Schema>;
  const out: StripeFields = { apiVersion: spec.info.version, objects: {} };
  for (const object of [...objects].sort()) {
    const schema = schemas[object];
    if (!schema?.properties) throw new Error(`the spec has no schema ${object}`);
    const fields: Record<string, string> = {};
    for (const [name, prop] of Object.entries(schema.properties)) if (name !== 'object') fields[name] = kindOf(schemas, prop);
    out.objects[object] = fields;
  }
  return out;
}

/** The object types the committed catalog makes tables of. */
export function catalogObjects(): string[] {
  const catalog = JSON.parse(readFileSync(CATALOG_DATA, 'utf8')) as { tables: Array<{ object: string }> };
  return catalog.tables.map((t) => t.object);
}

/** One object a line, so a spec update reads well in a diff. */
export function renderFields(fields: StripeFields): string {
  const lines = Object.entries(fields.objects).map(([object, f]) => `    ${JSON.stringify(object)}: ${JSON.stringify(f)}`);
  return `{\n  "apiVersion": ${JSON.stringify(fields.apiVersion)},\n  "objects": {\n${lines.join(',\n')}\n  }\n}\n`;
}

function main() {
  const { values } = parseArgs({ options: { spec: { type: 'string' } } });
  const spec = readSpec(values.spec ?? stripeMockSpecPath());
  writeFileSync(FIELDS_PATH, renderFields(extractFields(spec, catalogObjects())));
  console.log(`${FIELDS_PATH}: fields of ${catalogObjects().length} object types (Stripe ${spec.info.version})`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
