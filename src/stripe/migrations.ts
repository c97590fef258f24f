import type { SyncDbMigration } from '../syncdb/migrate.ts';

/**
 * A Stripe sync database's own bookkeeping in `public_swap`. The first step adopts a database
 * made before the steps were numbered: it creates only what is missing.
 */
export const STRIPE_MIGRATIONS: SyncDbMigration[] = [
  {
    version: 1,
    name: 'versions, covered lists, upcoming invoices due',
    async up(client) {
      // The newest version of each object written (events, lists, the proxy): an older one never overwrites it.
      await client.query(
        `CREATE TABLE IF NOT EXISTS public_swap._stripe_versions (
           tbl text NOT NULL, id text NOT NULL, version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false,
           PRIMARY KEY (tbl, id))`,
      );
      // Child lists read whole for a parent: their rows are complete.
      await client.query(
        `CREATE TABLE IF NOT EXISTS public_swap._stripe_covered (
           list text NOT NULL, parent_id text NOT NULL, PRIMARY KEY (list, parent_id))`,
      );
      // Customers and subscriptions whose upcoming invoice is to be read again.
      await client.query(
        `CREATE TABLE IF NOT EXISTS public_swap._stripe_upcoming_due (
           kind text NOT NULL CHECK (kind IN ('customer', 'subscription')), id text NOT NULL,
           marked_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (kind, id))`,
      );
    },
  },
];

export const STRIPE_SCHEMA = { scope: 'stripe', migrations: STRIPE_MIGRATIONS };
