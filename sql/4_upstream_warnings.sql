-- What the creation check found the key cannot read (a restricted Stripe key without
-- some permissions): those objects are skipped, and the sync says so.
ALTER TABLE syncs ADD COLUMN upstream_warnings text[] NOT NULL DEFAULT '{}';
