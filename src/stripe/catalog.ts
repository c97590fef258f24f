/**
 * The Stripe object catalog: one table per listable Stripe object type, with its columns and
 * the list endpoints that yield it. Generated from the OpenAPI spec that ships with stripe-mock
 * (`scripts/stripe-catalog.ts`) and committed as `catalog.json`, so a sync never needs the spec.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The API version every Stripe request pins; the catalog was generated from this version's spec. */
export const STRIPE_API_VERSION = '2026-08-26.dahlia';
/** The stripe-mock release whose embedded spec the catalog comes from. */
export const STRIPE_MOCK_VERSION = 'v0.203.0';

export const CATALOG_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), 'catalog.json');

export type ColumnType = 'text' | 'bigint' | 'boolean' | 'timestamptz' | 'numeric' | 'double precision' | 'jsonb' | 'text[]';

export interface CatalogColumn {
  name: string;
  type: ColumnType;
  /** The API returns an id here unless asked to expand it; the column holds the id. */
  expandable?: true;
  /** First sentence of the spec's description, at most 200 characters. */
  description?: string;
}

export type PermissionGroup = 'core' | 'checkout' | 'billing' | 'connect' | 'orders' | 'issuing' | 'reporting' | 'other';

export interface CatalogList {
  /** e.g. `/v1/customers`, `/v1/customers/{customer}/tax_ids` */
  path: string;
  /** The table whose ids must be listed first; each id goes in `pathParam` or in `queryParam`. */
  parent?: { table: string; pathParam?: string; queryParam?: string };
  /** Fixed query parameters without which the list would leave objects out. */
  query?: Record<string, string>;
  /** Permission group a restricted key needs (best effort). */
  group: string;
  /** False for the few lists that answer in one go and refuse `limit` and `starting_after`. */
  paged?: false;
}

export interface CatalogTable {
  table: string;
  /** Stripe's `object` value, e.g. `checkout.session`. */
  object: string;
  /** Top-level list (no parent) first. */
  lists: CatalogList[];
  /** `id` first, then the spec's order. */
  columns: CatalogColumn[];
  description?: string;
  /**
   * Rows stay when the upstream no longer lists them: a backfill removes none (events, which
   * Stripe keeps 30 days and the table keeps for good).
   */
  retained?: true;
}

export interface Catalog {
  apiVersion: string;
  stripeMockVersion: string;
  tables: CatalogTable[];
  skipped: { path: string; reason: string }[];
}

let cached: { catalog: Catalog; byObject: Map<string, CatalogTable> } | undefined;

function load() {
  if (cached) return cached;
  const catalog = JSON.parse(readFileSync(CATALOG_PATH, 'utf8')) as Catalog;
  // A catalog from another API version would name columns the pinned version never sends.
  if (catalog.apiVersion !== STRIPE_API_VERSION || catalog.stripeMockVersion !== STRIPE_MOCK_VERSION) {
    throw new Error(
      `${CATALOG_PATH} is for Stripe ${catalog.apiVersion} (stripe-mock ${catalog.stripeMockVersion}), ` +
        `expected ${STRIPE_API_VERSION} (stripe-mock ${STRIPE_MOCK_VERSION}); run scripts/stripe-catalog.ts`,
    );
  }
  cached = { catalog, byObject: new Map(catalog.tables.map((t) => [t.object, t])) };
  return cached;
}

export function loadCatalog(): Catalog {
  return load().catalog;
}

/** The table for a Stripe `object` value such as `checkout.session`; undefined if it is not synced. */
export function tableForObject(objectName: string): CatalogTable | undefined {
  return load().byObject.get(objectName);
}
