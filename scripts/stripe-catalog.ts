/**
 * Generates src/stripe/catalog.json from the OpenAPI spec that ships with stripe-mock.
 *
 *   node --import tsx scripts/stripe-catalog.ts [--spec <spec3.json>] [--out <catalog.json>]
 *
 * Without --spec the spec comes from the Go module cache (`go mod download` fetches the pinned
 * stripe-mock release if it is missing). The output is deterministic, so the test can check
 * that the committed catalog is what this script makes of the pinned spec.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  CATALOG_PATH,
  STRIPE_MOCK_VERSION,
  type Catalog,
  type CatalogColumn,
  type CatalogList,
  type CatalogTable,
  type ColumnType,
  type PermissionGroup,
} from '../src/stripe/catalog.ts';

const STRIPE_MOCK_MODULE = 'github.com/stripe/stripe-mock';

interface Schema {
  type?: string;
  format?: string;
  description?: string;
  $ref?: string;
  anyOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  enum?: unknown[];
  'x-resourceId'?: string;
  'x-expansionResources'?: unknown;
}
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
}
interface Operation {
  deprecated?: boolean;
  description?: string;
  parameters?: Parameter[];
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
export interface OpenApiSpec {
  info: { version: string };
  paths: Record<string, { get?: Operation }>;
  components: { schemas: Record<string, Schema> };
}

/**
 * Lists whose default leaves objects out. `replace` changes every request to the path; otherwise
 * the query is one more listing next to the default one. `evidence` must still be in the spec's
 * text, so a spec update that changes the behaviour stops the generator instead of going unnoticed.
 */
const COMPLETING_QUERIES: { path: string; query: Record<string, string>; replace: boolean; evidence: string }[] = [
  {
    path: '/v1/subscriptions',
    query: { status: 'all' },
    replace: true,
    evidence: 'returns a list of subscriptions that have not been canceled',
  },
  {
    path: '/v1/prices',
    query: { active: 'false' },
    replace: false,
    evidence: 'For the list of inactive prices, set active to false',
  },
  {
    path: '/v1/payment_methods',
    query: { type: 'custom' },
    replace: false,
    evidence: 'returns all payment method types except `custom`',
  },
];

/** Restricted-key permission groups by the first path segment after /v1; the rest is `other`. */
const GROUPS: Record<PermissionGroup, string[]> = {
  core: [
    'apple_pay',
    'balance',
    'balance_transactions',
    'charges',
    'country_specs',
    'customers',
    'disputes',
    'events',
    'exchange_rates',
    'file_links',
    'files',
    'mandates',
    'payment_attempt_records',
    'payment_intents',
    'payment_method_configurations',
    'payment_method_domains',
    'payment_methods',
    'payment_records',
    'payouts',
    'products',
    'refunds',
    'setup_attempts',
    'setup_intents',
    'sources',
    'tax_codes',
    'tokens',
  ],
  checkout: ['checkout', 'payment_links', 'shipping_rates'],
  billing: [
    'billing',
    'billing_portal',
    'coupons',
    'credit_notes',
    'entitlements',
    'invoice_payments',
    'invoice_rendering_templates',
    'invoiceitems',
    'invoices',
    'plans',
    'prices',
    'promotion_codes',
    'quotes',
    'subscription_items',
    'subscription_schedules',
    'subscriptions',
    'tax_ids',
    'tax_rates',
    'test_helpers',
  ],
  connect: ['accounts', 'application_fees', 'topups', 'transfers'],
  orders: ['orders'],
  issuing: ['issuing'],
  reporting: ['reporting', 'sigma'],
  other: [],
};
const groupOfSegment = new Map(Object.entries(GROUPS).flatMap(([group, segments]) => segments.map((s) => [s, group])));

/** A GET endpoint that answers `{object: "list", data: [...]}`, and the objects it yields. */
interface Endpoint {
  path: string;
  op: Operation;
  objects: string[];
  parent?: { object: string; pathParam: string } | { object: string; queryParam: string };
}

/** What the steps below share: the spec, the paths left out so far, the objects that can be listed. */
interface Context {
  spec: OpenApiSpec;
  skipped: Map<string, string>;
  listable: Set<string>;
  schemaOfObject: Map<string, Schema>;
}

const refName = (ref: string) => ref.slice(ref.lastIndexOf('/') + 1);
const firstSegment = (p: string) => p.split('/')[2] ?? '';
const paramsIn = (op: Operation, where: string) => (op.parameters ?? []).filter((p) => p.in === where);
const jsonSchemaOf = (op: Operation | undefined) => op?.responses?.['200']?.content?.['application/json']?.schema;
const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function resolve(ctx: Context, s: Schema): Schema {
  return s.$ref ? (ctx.spec.components.schemas[refName(s.$ref)] ?? {}) : s;
}

function objectOf(ctx: Context, s: Schema): string | undefined {
  const r = resolve(ctx, s);
  const value = r.properties?.object?.enum?.[0];
  return typeof value === 'string' ? value : r['x-resourceId'];
}

function listItems(op: Operation | undefined): Schema | undefined {
  const s = jsonSchemaOf(op);
  return s?.properties?.object?.enum?.includes('list') ? s.properties.data?.items : undefined;
}

/** The spec's description cut to its first sentence, as plain text, for column and table comments. */
export function firstSentence(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const plain = text
    .replace(/<[^>]+>/g, ' ')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\s+/g, ' ')
    .trim();
  let end = plain.length;
  for (const m of plain.matchAll(/[.!?](?=\s|$)/g)) {
    if (/\b(e\.g|i\.e|etc|vs)$/i.test(plain.slice(0, m.index))) continue;
    end = m.index + 1;
    break;
  }
  const sentence = plain.slice(0, end);
  if (!sentence) return undefined;
  return sentence.length <= 200 ? sentence : `${sentence.slice(0, 199).trimEnd()}…`;
}

export function buildCatalog(spec: OpenApiSpec): Catalog {
  const ctx: Context = { spec, skipped: new Map(), listable: new Set(), schemaOfObject: new Map() };
  let endpoints = findListEndpoints(ctx);
  ctx.listable = new Set(endpoints.flatMap((e) => e.objects));
  endpoints = endpoints.filter((e) => attachParent(ctx, e));
  endpoints = dropDuplicates(ctx, endpoints);
  // A list whose parent lost all its own lists cannot be reached.
  for (let before = -1; before !== endpoints.length; ) {
    before = endpoints.length;
    ctx.listable = new Set(endpoints.flatMap((e) => e.objects));
    const reachable = (e: Endpoint) => !e.parent || ctx.listable.has(e.parent.object);
    endpoints = endpoints.filter((e) => reachable(e) || skip(ctx, e, `parent ${e.parent?.object} has no list endpoint`));
  }
  checkCompletingQueries(endpoints);

  const lists = new Map<string, CatalogList[]>();
  for (const e of endpoints) {
    for (const [object, list] of catalogLists(ctx, e)) lists.set(object, [...(lists.get(object) ?? []), list]);
  }
  const tables = [...lists].map(([object, objectLists]): CatalogTable => {
    const schema = ctx.schemaOfObject.get(object) ?? {};
    const description = firstSentence(schema.description);
    return {
      table: tableName(object),
      object,
      ...(description ? { description } : {}),
      // Stripe keeps events 30 days; the table keeps them past that (the account's audit trail).
      ...(RETAINED.has(object) ? { retained: true as const } : {}),
      lists: objectLists.sort(compareLists),
      columns: columnsOf(ctx, schema),
    };
  });
  return {
    apiVersion: spec.info.version,
    stripeMockVersion: STRIPE_MOCK_VERSION,
    tables: tables.sort((a, b) => byString(a.table, b.table)),
    skipped: [...ctx.skipped].sort(([a], [b]) => byString(a, b)).map(([p, reason]) => ({ path: p, reason })),
  };
}

/** Objects the upstream forgets while the table keeps them (a backfill removes none of their rows). */
const RETAINED = new Set(['event']);

function skip(ctx: Context, e: { path: string }, reason: string): false {
  ctx.skipped.set(e.path, reason);
  return false;
}

function findListEndpoints(ctx: Context): Endpoint[] {
  const endpoints: Endpoint[] = [];
  for (const p of Object.keys(ctx.spec.paths).sort(byString)) {
    const op = ctx.spec.paths[p]?.get;
    const items = listItems(op);
    if (!op || !items) continue;
    // Search answers `search_result`, not `list`, so it never gets here; this guards a change.
    const reason = p.endsWith('/search')
      ? 'search endpoint: the plain list yields the same objects'
      : /\/(preview|upcoming)(\/|$)/.test(p)
        ? 'lists a preview of objects that do not exist yet'
        : undefined;
    if (reason) {
      skip(ctx, { path: p }, reason);
      continue;
    }
    const objects: string[] = [];
    const withoutId: string[] = [];
    for (const variant of items.anyOf ?? [items]) {
      if (!variant.$ref || refName(variant.$ref).startsWith('deleted_')) continue;
      const object = objectOf(ctx, variant);
      const schema = resolve(ctx, variant);
      if (!object) continue;
      // The id is the primary key; objects without one could not be kept up to date.
      if (!schema.properties?.id) withoutId.push(object);
      else {
        objects.push(object);
        ctx.schemaOfObject.set(object, schema);
      }
    }
    if (objects.length > 0) endpoints.push({ path: p, op, objects });
    else skip(ctx, { path: p }, withoutId.length ? `${withoutId.join(', ')} objects have no id` : 'lists no objects');
  }
  return endpoints;
}

/**
 * Ids passed as parameters are named after the object, inside the path's namespace first:
 * `card` on /v1/issuing/tokens is an issuing.card, `test_clock` is a test_helpers.test_clock.
 */
function objectNamed(ctx: Context, name: string, p: string): string | undefined {
  const found = [`${firstSegment(p)}.${name}`, name].find((c) => ctx.listable.has(c));
  if (found) return found;
  const namespaced = [...ctx.listable].filter((o) => o.endsWith(`.${name}`));
  return namespaced.length === 1 ? namespaced[0] : undefined;
}

/** Finds whose ids the endpoint needs first; false (and skipped) when it needs what no list gives. */
function attachParent(ctx: Context, e: Endpoint): boolean {
  const pathParams = paramsIn(e.op, 'path');
  const required = paramsIn(e.op, 'query').filter((q) => q.required);
  const names = required.map((q) => q.name).join(', ');
  if (pathParams.length > 1) return skip(ctx, e, 'needs more than one parent id');
  const [pathParam] = pathParams;
  if (pathParam) {
    // The parent of /v1/x/{id}/y is what /v1/x lists, or else what GET /v1/x/{id} returns.
    const marker = `/{${pathParam.name}}`;
    const prefix = e.path.slice(0, e.path.indexOf(marker));
    const listed = listItems(ctx.spec.paths[prefix]?.get);
    const retrieved = jsonSchemaOf(ctx.spec.paths[prefix + marker]?.get);
    const ref = listed?.$ref ? listed : retrieved?.$ref ? retrieved : undefined;
    const object = ref && objectOf(ctx, ref);
    if (!object || !ctx.listable.has(object)) return skip(ctx, e, `parent ${object ?? prefix} has no list endpoint`);
    if (required.length > 0) return skip(ctx, e, `needs ${names} besides the parent id`);
    e.parent = { object, pathParam: pathParam.name };
    return true;
  }
  if (required.length === 0) return true;
  const [only] = required;
  const object = only && required.length === 1 ? objectNamed(ctx, only.name, e.path) : undefined;
  if (!only || !object) return skip(ctx, e, `requires ${names}, which no list supplies`);
  e.parent = { object, queryParam: only.name };
  return true;
}

/**
 * Two names for one endpoint (same text, objects and parent) would list everything twice; so
 * would a deprecated list whose objects another list already yields. The kept alias is the one
 * named after its objects (`balance_transactions`, not `balance/history`).
 */
function dropDuplicates(ctx: Context, endpoints: Endpoint[]): Endpoint[] {
  const sameParent = (a: Endpoint, b: Endpoint) => a.parent?.object === b.parent?.object;
  const namedAfter = (e: Endpoint, o: string) => e.path.endsWith(`/${o.slice(o.lastIndexOf('.') + 1)}s`);
  const rank = (e: Endpoint) => (e.objects.some((o) => namedAfter(e, o)) ? 0 : 1);
  const preferred = (a: Endpoint, b: Endpoint) => rank(a) < rank(b) || (rank(a) === rank(b) && a.path < b.path);
  return endpoints.filter((e) => {
    const twin = endpoints.find(
      (o) => o !== e && sameParent(o, e) && o.op.description === e.op.description && o.objects.join() === e.objects.join() && preferred(o, e),
    );
    if (twin) return skip(ctx, e, `alias of ${twin.path}`);
    if (!e.op.deprecated) return true;
    const covering = endpoints.filter((o) => !o.op.deprecated && sameParent(o, e) && o.objects.some((x) => e.objects.includes(x)));
    if (!e.objects.every((x) => covering.some((o) => o.objects.includes(x)))) return true;
    return skip(ctx, e, `deprecated; ${covering.map((o) => o.path).join(', ')} lists the same objects`);
  });
}

function checkCompletingQueries(endpoints: Endpoint[]): void {
  for (const fix of COMPLETING_QUERIES) {
    const e = endpoints.find((x) => x.path === fix.path);
    if (!e) throw new Error(`completing query for ${fix.path}: no such list endpoint`);
    const text = [e.op.description, ...(e.op.parameters ?? []).map((q) => q.description)].join('\n');
    if (!text.replace(/<[^>]+>/g, '').includes(fix.evidence)) {
      throw new Error(`completing query for ${fix.path}: the spec no longer says "${fix.evidence}"`);
    }
    for (const [name, value] of Object.entries(fix.query)) {
      const param = paramsIn(e.op, 'query').find((q) => q.name === name);
      const allowed = param?.schema?.type === 'boolean' ? ['true', 'false'] : param?.schema?.enum;
      if (!allowed?.includes(value)) {
        throw new Error(`completing query for ${fix.path}: ${name}=${value} is not allowed`);
      }
    }
  }
}

/** The catalog entries of one endpoint: per object it yields, per parent, per completing query. */
function catalogLists(ctx: Context, e: Endpoint): [string, CatalogList][] {
  const group = groupOfSegment.get(firstSegment(e.path)) ?? 'other';
  // A few lists answer everything at once and refuse `limit` / `starting_after`.
  const paged = paramsIn(e.op, 'query').some((q) => q.name === 'starting_after');
  const fixes = COMPLETING_QUERIES.filter((f) => f.path === e.path);
  const base: Record<string, string> = Object.assign({}, ...fixes.filter((f) => f.replace).map((f) => f.query));
  const queries = [base, ...fixes.filter((f) => !f.replace).map((f) => ({ ...base, ...f.query }))];
  const parents: CatalogList['parent'][] = [e.parent && parentRef(e.parent)];
  // Objects tied to a test clock only show up when the list is asked for that clock (or customer).
  for (const q of paramsIn(e.op, 'query')) {
    if (e.parent || q.required || !/will not include/i.test(q.description ?? '')) continue;
    const object = objectNamed(ctx, q.name, e.path);
    if (object) parents.push({ table: tableName(object), queryParam: q.name });
  }
  return e.objects.flatMap((object) =>
    parents.flatMap((parent) =>
      queries.map((query): [string, CatalogList] => [
        object,
        {
          path: e.path,
          ...(parent ? { parent } : {}),
          ...(Object.keys(query).length > 0 ? { query } : {}),
          group,
          ...(paged ? {} : { paged: false as const }),
        },
      ]),
    ),
  );
}

const tableName = (object: string) => object.replaceAll('.', '_');

function parentRef(parent: NonNullable<Endpoint['parent']>): NonNullable<CatalogList['parent']> {
  const table = tableName(parent.object);
  return 'pathParam' in parent ? { table, pathParam: parent.pathParam } : { table, queryParam: parent.queryParam };
}

/** Lists without a parent first, so a backfill can start from the top. */
function compareLists(a: CatalogList, b: CatalogList): number {
  const key = (l: CatalogList) => [l.parent ? 1 : 0, l.path, l.parent?.table ?? '', l.query ? JSON.stringify(l.query) : ''].join('\u0000');
  return byString(key(a), key(b));
}

function columnsOf(ctx: Context, schema: Schema): CatalogColumn[] {
  const props = Object.entries(schema.properties ?? {}).filter(([name]) => name !== 'object');
  props.sort(([a], [b]) => (a === 'id' ? -1 : b === 'id' ? 1 : 0));
  return props.map(([name, prop]) => {
    const expandable = isExpandable(prop);
    // A bare $ref carries no description of its own; the referenced schema's stands in.
    const description = firstSentence(prop.description ?? resolve(ctx, prop).description);
    return {
      name,
      type: expandable ? 'text' : columnType(ctx, prop),
      ...(expandable ? { expandable: true as const } : {}),
      ...(description ? { description } : {}),
    };
  });
}

/** An id the API replaces with the object when asked to expand it: `anyOf: [string, $ref…]`. */
function isExpandable(s: Schema): boolean {
  return Boolean(s['x-expansionResources'] && s.anyOf?.some((v) => v.type === 'string') && s.anyOf.some((v) => v.$ref));
}

function columnType(ctx: Context, s: Schema): ColumnType {
  // `anyOf: [X]` is how the spec makes X nullable; more than one variant is polymorphic.
  if (s.anyOf) return s.anyOf.length === 1 && s.anyOf[0] ? columnType(ctx, s.anyOf[0]) : 'jsonb';
  if (s.$ref) {
    const target = resolve(ctx, s);
    return target.properties || target.type === 'object' || !target.type ? 'jsonb' : columnType(ctx, target);
  }
  switch (s.type) {
    case 'integer':
      return s.format === 'unix-time' ? 'timestamptz' : 'bigint';
    case 'number':
      return 'double precision';
    case 'boolean':
      return 'boolean';
    case 'string':
      return s.format === 'decimal' ? 'numeric' : 'text';
    case 'array': {
      const items = s.items;
      return items && items.type === 'string' && !items.anyOf && !items.$ref ? 'text[]' : 'jsonb';
    }
    default:
      return 'jsonb';
  }
}

/** Pretty enough to review in a diff: one line per list, column and skipped path. */
export function renderCatalog(catalog: Catalog): string {
  const j = (v: unknown) => JSON.stringify(v);
  const lines = ['{', `  "apiVersion": ${j(catalog.apiVersion)},`];
  lines.push(`  "stripeMockVersion": ${j(catalog.stripeMockVersion)},`, '  "tables": [');
  catalog.tables.forEach((t, i) => {
    lines.push('    {', `      "table": ${j(t.table)},`, `      "object": ${j(t.object)},`);
    if (t.description !== undefined) lines.push(`      "description": ${j(t.description)},`);
    if (t.retained) lines.push('      "retained": true,');
    lines.push('      "lists": [', t.lists.map((l) => `        ${j(l)}`).join(',\n'), '      ],');
    lines.push('      "columns": [', t.columns.map((c) => `        ${j(c)}`).join(',\n'), '      ]');
    lines.push(i < catalog.tables.length - 1 ? '    },' : '    }');
  });
  lines.push('  ],', '  "skipped": [', catalog.skipped.map((s) => `    ${j(s)}`).join(',\n'), '  ]', '}', '');
  return lines.join('\n');
}

/** spec3.json of the pinned stripe-mock, downloaded into the Go module cache if missing. */
export function stripeMockSpecPath(): string {
  const module = `${STRIPE_MOCK_MODULE}@${STRIPE_MOCK_VERSION}`;
  let out: string;
  try {
    // Outside any Go module, so a go.mod nearby cannot change what gets resolved.
    out = execFileSync('go', ['mod', 'download', '-json', module], {
      cwd: os.tmpdir(),
      env: { ...process.env, GO111MODULE: 'on' },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    const detail = [e.stdout, e.stderr].filter(Boolean).join('\n').trim() || e.message;
    throw new Error(`go mod download ${module} failed (Go must be installed; or pass --spec <spec3.json>): ${detail}`);
  }
  const { Dir } = JSON.parse(out) as { Dir?: string };
  if (!Dir) throw new Error(`go mod download ${module} did not report a directory: ${out}`);
  return path.join(Dir, 'embedded', 'openapi', 'spec3.json');
}

export function readSpec(specPath: string): OpenApiSpec {
  return JSON.parse(readFileSync(specPath, 'utf8')) as OpenApiSpec;
}

function main() {
  const { values } = parseArgs({ options: { spec: { type: 'string' }, out: { type: 'string' } } });
  const specPath = values.spec ?? stripeMockSpecPath();
  const catalog = buildCatalog(readSpec(specPath));
  const out = values.out ?? CATALOG_PATH;
  writeFileSync(out, renderCatalog(catalog));
  const listCount = new Set(catalog.tables.flatMap((t) => t.lists.map((l) => l.path))).size;
  console.log(
    `${out}: ${catalog.tables.length} tables from ${listCount} list endpoints, ` +
      `${catalog.skipped.length} skipped (Stripe ${catalog.apiVersion}, from ${specPath})`,
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
