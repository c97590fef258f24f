-- Several syncs in one database: a sync's tables live in its own schema (`public` for the
-- sync that made the database), and a sync made with `database_of` names the sync whose
-- database it shares (reader role, password, server and slot are that sync's). Its rebuilds
-- and bookkeeping live in `<schema>_swap`. Existing syncs keep `public` and own their database.
ALTER TABLE syncs
  ADD COLUMN schema text NOT NULL DEFAULT 'public' CHECK (schema ~ '^[a-z][a-z0-9_]{0,57}$'),
  ADD COLUMN database_of text REFERENCES syncs (id),
  ADD CONSTRAINT syncs_shared_schema CHECK ((database_of IS NULL) = (schema = 'public'));
-- One schema name per database; a row being deleted still holds its name until it is gone.
ALTER TABLE syncs DROP CONSTRAINT syncs_database_name_key;
CREATE UNIQUE INDEX syncs_database_schema_idx ON syncs (database_name, schema);
CREATE INDEX syncs_database_of_idx ON syncs (database_of) WHERE database_of IS NOT NULL;
-- A sync that shares a database adds no reader: its row holds no connections of the budget.
ALTER TABLE syncs DROP CONSTRAINT syncs_reader_connection_limit_check,
  ADD CONSTRAINT syncs_reader_connection_limit_check CHECK (reader_connection_limit >= 1 OR database_of IS NOT NULL);
