-- Per-sync bounds on what a read-only role's statements may take of the shared server, set on
-- the role (ALTER ROLE … SET) and changed by the operator (PATCH /api/syncs/:id). Without them
-- one reader could hold a backend for ever and fill the server's disk with temporary files.
-- Existing syncs get the defaults; their roles are brought in line at the sync's next check.
ALTER TABLE syncs
  ADD COLUMN reader_statement_timeout_ms int NOT NULL DEFAULT 60000
    CHECK (reader_statement_timeout_ms BETWEEN 0 AND 86400000),
  ADD COLUMN reader_idle_in_transaction_timeout_ms int NOT NULL DEFAULT 300000
    CHECK (reader_idle_in_transaction_timeout_ms BETWEEN 0 AND 86400000),
  ADD COLUMN reader_temp_file_limit_mb int NOT NULL DEFAULT 1024
    CHECK (reader_temp_file_limit_mb BETWEEN 1 AND 1048576);
