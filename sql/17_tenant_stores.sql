-- Every table a tenant can add rows to has a bound (docs/security.md, "Bounds on what a tenant
-- can store"). A tenant once grew the control database from 16 to 77 MB in 1,000 consume calls:
-- each new group name stored an instance with up to 1,000 topic names, owned or not, forever.

-- The operator's per-account limits, beside max_syncs (PATCH /api/accounts/:id).
ALTER TABLE accounts
  ADD COLUMN max_consumer_groups int NOT NULL DEFAULT 50 CHECK (max_consumer_groups >= 0),
  ADD COLUMN max_group_members int NOT NULL DEFAULT 20 CHECK (max_group_members >= 0),
  ADD COLUMN max_webhooks int NOT NULL DEFAULT 100 CHECK (max_webhooks >= 0);

-- The consumer groups of an account, counted against max_consumer_groups. A group is made by
-- a consume or an explicit commit; active_at is its last one (written at most once a minute).
-- A group with no instance left goes, committed offsets and all, once it has been idle for
-- the retention (7 days by default, as Kafka keeps committed offsets).
CREATE TABLE consumer_groups (
  account_id text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  group_id   text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  active_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, group_id)
);
CREATE INDEX consumer_groups_active_idx ON consumer_groups (active_at);

INSERT INTO consumer_groups (account_id, group_id, active_at)
SELECT account_id, group_id, max(at) FROM (
  SELECT account_id, group_id, last_seen AS at FROM consumer_group_members
  UNION ALL
  SELECT account_id, group_id, updated_at FROM consumer_group_offsets
) seen
GROUP BY account_id, group_id;

ALTER TABLE consumer_group_members
  ADD FOREIGN KEY (account_id, group_id) REFERENCES consumer_groups (account_id, group_id) ON DELETE CASCADE;
ALTER TABLE consumer_group_offsets
  ADD FOREIGN KEY (account_id, group_id) REFERENCES consumer_groups (account_id, group_id) ON DELETE CASCADE;

-- Webhooks are counted per account as well as per sync.
CREATE INDEX webhook_destinations_account_idx ON webhook_destinations (account_id);
-- Exhausted deliveries past the per-destination cap are dropped, oldest first, and counted here.
ALTER TABLE webhook_destinations ADD COLUMN dropped_count bigint NOT NULL DEFAULT 0;

-- A sign-in past 20 live sessions of the account ends its least recently used one.
CREATE INDEX console_sessions_account_idx ON console_sessions (account_id);
