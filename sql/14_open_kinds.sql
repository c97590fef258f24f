-- The kinds of sync are the registered ones (SourceKind, src/kinds/): the control database no
-- longer lists them, nor says which of them has a base. A kind is a short lower-case name.
ALTER TABLE syncs DROP CONSTRAINT syncs_kind_check;
ALTER TABLE syncs DROP CONSTRAINT syncs_check;
ALTER TABLE syncs ADD CONSTRAINT syncs_kind_name CHECK (kind ~ '^[a-z][a-z0-9_]{0,31}$');
