-- Every table a tenant can add rows to has a bound (docs/security.md, "Bounds on what a tenant
-- can store"). A tenant once grew the control database from 16 to 77 MB in 1,000 consume calls:
-- each new group name stored an instance with up to 1,000 topic names, owned or not, forever.

-- The operator's per-account limits, beside max_syncs (PATCH /api/accounts/:id).
ALTER TABLE accounts
  ADD COLUMN max_consumer_groups int NOT NULL DEFAULT 50 CHECK (max_consumer_groups >= 0),
  ADD COLUMN max_group_members int NOT NULL DEFAULT 20 CHECK (max_group_members >= 0),
  ADD COLUMN max_webhooks int NOT NULL DEFAULT 100 CHECK (max_webhooks >= 0);
