/**
 * Regenerates the fake's committed slices of Stripe's OpenAPI spec (the one stripe-mock embeds,
 * pinned with the product's API version):
 *   node --import tsx fakes/stripe/spec/extract.ts [dir holding spec3.json and fixtures3.json]
 * - params.json: the parameters every endpoint accepts (query for GET/DELETE, form body for
 *   POST), so the fake rejects unknown or mistyped parameters the way Stripe does;
 * - paths.json: every path, what it answers (list, search, one object), for the endpoints the
 *   fake does not model;
 * - objects.json: each modeled object's fields (all, always present, present by default), which
 *   the tests hold the fake's objects to.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ParamSchema, PathInfo } from './index.ts';

type Json = Record<string, unknown>;

const dir = process.argv[2] ?? join(homedir(), 'go/pkg/mod/github.com/stripe/stripe-mock@v0.203.0/embedded/openapi');
const spec = JSON.parse(readFileSync(join(dir, 'spec3.json'), 'utf8')) as Json;
const fixtures = (JSON.parse(readFileSync(join(dir, 'fixtures3.json'), 'utf8')) as { resources: Record<string, Json> }).resources;
const schemas = (spec.components as { schemas: Record<string, Json> }).schemas;
const paths = spec.paths as Record<string, Record<string, Json>>;

/** Objects the fake builds itself; their field lists go to objects.json. */
const MODELED_OBJECTS = [
  'customer',
  'product',
  'price',
  'plan',
  'coupon',
  'discount',
  'subscription',
  'subscription_item',
  'invoice',
  'line_item',
  'invoiceitem',
  'invoice_payment',
  'payment_intent',
  'charge',
  'refund',
  'payment_method',
  'checkout.session',
  'item',
  'balance_transaction',
  'payout',
  'dispute',
  'event',
  'entitlements.feature',
  'test_helpers.test_clock',
];

function compact(schema: Json | undefined): ParamSchema {
  if (!schema || schema.$ref) return 'x';
  if (Array.isArray(schema.anyOf)) return { u: (schema.anyOf as Json[]).map(compact) };
  if (Array.isArray(schema.enum)) return { e: schema.enum as string[] };
  switch (schema.type) {
    case 'string':
      return schema.format === 'binary' ? 'x' : typeof schema.maxLength === 'number' && schema.maxLength !== 5000 ? { s: schema.maxLength } : 's';
    case 'integer':
      return 'i';
    case 'number':
      return 'n';
    case 'boolean':
      return 'b';
    case 'array':
      return { a: compact(schema.items as Json | undefined) };
    case 'object': {
      const props = schema.properties as Record<string, Json> | undefined;
      if (props) {
        const o: Record<string, ParamSchema> = {};
        for (const [k, v] of Object.entries(props)) o[k] = compact(v);
        const r = (schema.required as string[] | undefined) ?? [];
        return r.length > 0 ? { o, r } : { o };
      }
      if (schema.additionalProperties) return { m: schema.additionalProperties === true ? 'x' : compact(schema.additionalProperties as Json) };
      return 'x';
    }
    default:
      return 'x';
  }
}

function resolve(schema: Json | undefined): Json | undefined {
  if (!schema) return undefined;
  if (typeof schema.$ref === 'string') return schemas[schema.$ref.split('/').pop() as string];
  return schema;
}

/** What a GET answers: a list of X, a search result of X, or one X. */
function describe(op: Json): Pick<PathInfo, 'kind' | 'object'> {
  const content = ((op.responses as Json)['200'] as Json | undefined)?.content as Json | undefined;
  const schema = resolve((content?.['application/json'] as Json | undefined)?.schema as Json | undefined);
  if (!schema) return { kind: 'other' };
  const props = schema.properties as Record<string, Json> | undefined;
  const objectEnum = (props?.object?.enum as string[] | undefined)?.[0];
  if (objectEnum === 'list' || objectEnum === 'search_result') {
    const items = resolve((props?.data as Json | undefined)?.items as Json | undefined);
    const itemObject = ((items?.properties as Record<string, Json> | undefined)?.object?.enum as string[] | undefined)?.[0];
    return { kind: objectEnum === 'list' ? 'list' : 'search', ...(itemObject ? { object: itemObject } : {}) };
  }
  const single = objectEnum ?? (schema['x-resourceId'] as string | undefined);
  return single ? { kind: 'object', object: single } : { kind: 'other' };
}

/** Form bodies are kept only where the fake implements writes; other writes answer before parsing. */
const MODELED_WRITES =
  /^\/v1\/(customers|products|prices|plans|coupons|subscriptions|subscription_items|invoices|invoiceitems|payment_intents|charges|refunds|payment_methods|checkout\/sessions|payouts|disputes|entitlements\/features|test_helpers\/test_clocks)(\/|$)/;

/** Connect: connected accounts themselves (not their capabilities, persons or external accounts), and webhook endpoints. */
const CONNECT_WRITES = /^\/v1\/(accounts(\/\{account\})?|webhook_endpoints(\/\{webhook_endpoint\})?)$/;

const params: Record<string, ParamSchema> = {};
const pathList: PathInfo[] = [];
for (const [path, ops] of Object.entries(paths)) {
  for (const [method, op] of Object.entries(ops)) {
    const m = method.toUpperCase();
    const parameters = (op.parameters as Json[] | undefined) ?? [];
    if (m === 'GET' || m === 'DELETE') {
      const o: Record<string, ParamSchema> = {};
      const r: string[] = [];
      for (const p of parameters) {
        if (p.in !== 'query') continue;
        o[p.name as string] = compact(p.schema as Json);
        if (p.required) r.push(p.name as string);
      }
      params[`${m} ${path}`] = r.length > 0 ? { o, r } : { o };
    } else if (MODELED_WRITES.test(path) || CONNECT_WRITES.test(path)) {
      const body = ((op.requestBody as Json | undefined)?.content as Json | undefined)?.['application/x-www-form-urlencoded'] as Json | undefined;
      params[`${m} ${path}`] = body ? compact(body.schema as Json) : { o: {} };
    }
    pathList.push({ method: m, path, ...(m === 'GET' ? describe(op) : { kind: 'other' }) });
  }
}

const objects: Record<string, { props: string[]; required: string[]; defaults: string[] }> = {};
for (const name of MODELED_OBJECTS) {
  const schema = schemas[name];
  if (!schema) throw new Error(`no schema ${name}`);
  const props = Object.keys(schema.properties as Json);
  const fixture = fixtures[name] ?? {};
  objects[name] = {
    props,
    required: (schema.required as string[] | undefined) ?? [],
    defaults: props.filter((p) => p in fixture),
  };
}

const out = new URL('.', import.meta.url);
const info = spec.info as { version: string };
writeFileSync(new URL('params.json', out), `${JSON.stringify({ version: info.version, params })}\n`);
writeFileSync(new URL('paths.json', out), `${JSON.stringify({ version: info.version, paths: pathList })}\n`);
writeFileSync(new URL('objects.json', out), `${JSON.stringify({ version: info.version, objects }, null, 1)}\n`);
process.stdout.write(`spec ${info.version}: ${Object.keys(params).length} endpoints, ${MODELED_OBJECTS.length} objects\n`);
