-- The pool of target servers that hold per-sync databases. Each has a region and a capacity
-- (syncs it may hold); a new sync goes to the server of its region with the most room that is
-- not draining. The server named by the configuration (TRIBUTARY_TARGET_DATABASE_URL, else the
-- control database's) is the first member: its url_enc is NULL and its URL is read from the
-- configuration at each start. Every other member's admin URL is sealed (AES-256-GCM, associated
-- data bound to the row) and never returned.
CREATE TABLE servers (
  id         text PRIMARY KEY,
  region     text NOT NULL CHECK (region ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  capacity   int NOT NULL CHECK (capacity >= 0),
  draining   boolean NOT NULL DEFAULT false,
  url_enc    text,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- At most one configured member, so that processes starting at once make it once.
CREATE UNIQUE INDEX servers_configured_idx ON servers ((url_enc IS NULL)) WHERE url_enc IS NULL;
CREATE INDEX servers_region_idx ON servers (region);

-- A sync's database is on a pool server (server_id) or on a customer-owned one
-- (database_server_enc), never both. Rows made before the pool get the configured member at
-- the next start. No cascade: a server is removed only once it holds no sync.
ALTER TABLE syncs
  ADD COLUMN server_id text REFERENCES servers (id),
  ADD CONSTRAINT syncs_one_server CHECK (server_id IS NULL OR database_server_enc IS NULL);
CREATE INDEX syncs_server_idx ON syncs (server_id);
