-- What the sync workers need: leases, richer status, the table mapping, and the shared quota.

-- A worker owns a sync while its lease is live; a dead worker's syncs move on when it lapses.
ALTER TABLE syncs
  ADD COLUMN lease_owner text,
  ADD COLUMN lease_until timestamptz,
  -- 'transient' (upstream 5xx, timeouts) or 'fatal' (key rejected, base gone): fatal is red at once.
  ADD COLUMN last_error_kind text CHECK (last_error_kind IN ('transient', 'fatal')),
  -- Upstream display name: the Airtable base's name or the Stripe account's.
  ADD COLUMN upstream_name text;

-- How each upstream table maps onto the sync database, as last built. A difference
-- between this and the mapping computed from the current upstream schema is a migration.
CREATE TABLE sync_tables (
  sync_id     text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  upstream_id text NOT NULL,
  db_name     text NOT NULL,
  mapping     jsonb NOT NULL,
  built_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (sync_id, upstream_id),
  UNIQUE (sync_id, db_name)
);

-- The upstream request quota shared by sync workers and proxies in every process:
-- a log of recent requests per key (an Airtable base, a Stripe account).
CREATE UNLOGGED TABLE quota_requests (
  key  text NOT NULL,
  at   timestamptz NOT NULL,
  kind text NOT NULL CHECK (kind IN ('client', 'sync'))
);
CREATE INDEX quota_requests_key_at ON quota_requests (key, at);

-- Clients queued for a key; while any is queued, sync requests step aside.
CREATE UNLOGGED TABLE quota_waiting (
  key   text NOT NULL,
  token text NOT NULL,
  until timestamptz NOT NULL,
  PRIMARY KEY (key, token)
);
