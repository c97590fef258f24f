import type { SyncDbMigration } from '../syncdb/migrate.ts';
import { bookkeeping, PUBLIC_SCHEMAS } from '../syncdb/schemas.ts';

/**
 * A Stripe sync makes its own database and is never made in another's (the kind does not set
 * `sharesDatabase`): its SQL names `public` and `public_swap`, and so does this.
 */
export const STRIPE_SCHEMAS = PUBLIC_SCHEMAS;

/**
 * A Stripe sync's own bookkeeping in `<schema>_swap`. The first step adopts a database
 * made before the steps were numbered: it creates only what is missing.
 */
export const STRIPE_MIGRATIONS: SyncDbMigration[] = [
  {
    version: 1,
    name: 'versions, covered lists, upcoming invoices due',
    async up(client, schemas) {
      // The newest version of each object written (events, lists, the proxy): an older one never overwrites it.
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${bookkeeping(schemas, '_stripe_versions')} (
           tbl text NOT NULL, id text NOT NULL, version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false,
           PRIMARY KEY (tbl, id))`,
      );
      // Child lists read whole for a parent: their rows are complete.
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${bookkeeping(schemas, '_stripe_covered')} (
           list text NOT NULL, parent_id text NOT NULL, PRIMARY KEY (list, parent_id))`,
      );
      // Customers and subscriptions whose upcoming invoice is to be read again.
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${bookkeeping(schemas, '_stripe_upcoming_due')} (
           kind text NOT NULL CHECK (kind IN ('customer', 'subscription')), id text NOT NULL,
           marked_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (kind, id))`,
      );
    },
  },
];

export const STRIPE_SCHEMA = { scope: 'stripe', migrations: STRIPE_MIGRATIONS };
