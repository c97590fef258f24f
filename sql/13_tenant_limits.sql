-- Per-tenant limits the operator can change (PATCH /api/accounts/:id, PATCH /api/syncs/:id):
-- how many syncs an account may have, how many connections its readers may hold in all, and
-- each reader's own CONNECTION LIMIT. One account's readers could otherwise take every slot
-- of the shared server, and every other tenant's syncs, proxy and webhooks with them.
ALTER TABLE accounts
  ADD COLUMN max_syncs int NOT NULL DEFAULT 20 CHECK (max_syncs >= 0),
  ADD COLUMN reader_connection_budget int NOT NULL DEFAULT 100 CHECK (reader_connection_budget >= 0);

-- Existing readers keep the 50 they were made with until the operator lowers them.
ALTER TABLE syncs
  ADD COLUMN reader_connection_limit int NOT NULL DEFAULT 50 CHECK (reader_connection_limit >= 1),
  -- SHA-256 of the upstream key, to refuse a second sync of one Stripe key in one account.
  ADD COLUMN api_key_sha256 text;
ALTER TABLE syncs ALTER COLUMN reader_connection_limit SET DEFAULT 5;
