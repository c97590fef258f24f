-- What the sync workers need: leases, richer status and the shared upstream quota.
-- (Each sync database keeps its own table mapping in public_swap._tables, so a schema
-- swap and the record of it commit together.)

-- A worker owns a sync while its lease is live; a dead worker's syncs move on when it lapses.
ALTER TABLE syncs
  ADD COLUMN lease_owner text,
  ADD COLUMN lease_until timestamptz,
  -- 'transient' (upstream 5xx, timeouts) or 'fatal' (key rejected, base gone): fatal is red at once.
  ADD COLUMN last_error_kind text CHECK (last_error_kind IN ('transient', 'fatal')),
  -- Upstream display name: the Airtable base's name or the Stripe account's.
  ADD COLUMN upstream_name text;

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

-- A moving average of cycle durations: a cycle running past 1.5x of it turns the indicator yellow.
ALTER TABLE syncs ADD COLUMN duration_usual interval;
