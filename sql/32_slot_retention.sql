-- Bounded WAL retention (docs/operations.md#wal-retention). Each pool server's
-- max_slot_wal_keep_size as last read (MB; -1: no bound; NULL: not read yet), and each sync's
-- slot as its decoder last read it: the WAL it holds (from its restart_lsn), what may still be
-- written before PostgreSQL drops WAL the slot needs (safe_wal_size, NULL without a bound), and
-- its wal_status (reserved, extended, unreserved, lost).
ALTER TABLE servers ADD COLUMN slot_wal_keep_mb bigint;
ALTER TABLE decoder_progress
  ADD COLUMN slot_retained_bytes bigint,
  ADD COLUMN slot_safe_bytes bigint,
  ADD COLUMN slot_wal_status text;
-- The free space of the disk a member's data lives on, where the service can read it (the
-- embedded server it started), and when it was read.
ALTER TABLE servers
  ADD COLUMN free_disk_bytes bigint,
  ADD COLUMN disk_read_at timestamptz;
