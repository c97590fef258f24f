-- Tributary's own state: accounts (tenants) and their syncs.
-- Secrets are stored sealed (AES-256-GCM, see src/control/secrets.ts) or, for tokens, hashed.

CREATE TABLE accounts (
  id                  text PRIMARY KEY,
  name                text NOT NULL,
  api_token_sha256    text NOT NULL UNIQUE,
  events_username     text NOT NULL UNIQUE,
  events_password_enc text NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now()
);

-- state: provisioning -> active -> deleting. Rows left in provisioning or deleting by a
-- crash are finished by the reconciler at the next start.
CREATE TABLE syncs (
  id                   text PRIMARY KEY,
  account_id           text NOT NULL REFERENCES accounts (id),
  kind                 text NOT NULL CHECK (kind IN ('airtable', 'stripe')),
  base_id              text,
  upstream_account_id  text,
  api_key_enc          text NOT NULL,
  settings             jsonb NOT NULL,
  state                text NOT NULL DEFAULT 'provisioning'
                       CHECK (state IN ('provisioning', 'active', 'deleting')),
  keep_database        boolean NOT NULL DEFAULT false,
  database_name        text NOT NULL UNIQUE,
  database_role        text NOT NULL,
  database_password_enc text NOT NULL,
  -- NULL: the shared server; otherwise the sealed admin URL of a customer-owned server.
  database_server_enc  text,
  -- Status, maintained by the sync worker.
  started_at           timestamptz,
  completed_at         timestamptz,
  duration_last        interval,
  last_error           text,
  last_error_at        timestamptz,
  progress             jsonb,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'airtable') = (base_id IS NOT NULL))
);

CREATE INDEX syncs_account_idx ON syncs (account_id);
-- One sync per Airtable base per account: two would split the base's 5 req/s quota.
CREATE UNIQUE INDEX syncs_base_idx ON syncs (account_id, base_id) WHERE base_id IS NOT NULL AND state <> 'deleting';

-- Only Tributary itself connects to the control database; the per-sync read-only roles
-- live on the same server by default and must not even be able to open it.
DO $$
BEGIN
  EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
EXCEPTION WHEN insufficient_privilege THEN
  RAISE WARNING 'not the owner of the control database: CONNECT stays granted to PUBLIC';
END $$;
