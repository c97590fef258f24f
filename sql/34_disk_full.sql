-- A cycle that failed because the sync database's server is out of disk space (SQLSTATE
-- 53100): the status is red at once with the reason, and the sync tries again until it can
-- write (docs/operations.md#full-disks).
ALTER TABLE syncs DROP CONSTRAINT syncs_last_error_kind_check,
  ADD CONSTRAINT syncs_last_error_kind_check CHECK (last_error_kind IN ('transient', 'fatal', 'disk_full'));
ALTER TABLE sync_errors DROP CONSTRAINT sync_errors_kind_check,
  ADD CONSTRAINT sync_errors_kind_check CHECK (kind IN ('transient', 'fatal', 'disk_full'));
