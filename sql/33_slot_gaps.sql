-- A replication slot lost and replaced (docs/events.md#gaps-a-lost-replication-slot): the changes between what the
-- event log held and the new slot's start are missing from the stream. One row per sync of
-- the slot's database. The decoder notices the loss, records these rows, makes a new slot,
-- then, member by member, writes a gap marker into the WAL and starts a backfill of every
-- collection (reason 'slot_lost'); marked_at says both are done. A decoder that restarts
-- with rows not yet marked finishes them, so a crash cannot leave a gap unsaid.
CREATE TABLE slot_gaps (
  id              text PRIMARY KEY,
  sync_id         text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  -- The sync whose decoder reads the slot (the database's first sync).
  decoder_sync_id text NOT NULL,
  slot            text NOT NULL,
  -- 'invalidated' (PostgreSQL dropped WAL it needed, or another invalidation) or 'missing'.
  reason          text NOT NULL,
  detail          text NOT NULL,
  -- Where the sync's event log stood when the loss was noticed, and where the new slot starts.
  logged_lsn      pg_lsn NOT NULL,
  resumed_lsn     pg_lsn,
  backfill_id     text NOT NULL,
  lost_at         timestamptz NOT NULL DEFAULT now(),
  recovered_at    timestamptz,
  marked_at       timestamptz
);
CREATE INDEX slot_gaps_sync_idx ON slot_gaps (sync_id, lost_at DESC);
CREATE INDEX slot_gaps_pending_idx ON slot_gaps (decoder_sync_id) WHERE marked_at IS NULL;

-- Why a backfill runs: asked for ('requested'), or the re-read after a lost slot
-- ('slot_lost'), which the account's backfill limits do not count or bound.
ALTER TABLE backfills ADD COLUMN reason text NOT NULL DEFAULT 'requested' CHECK (reason IN ('requested', 'slot_lost'));
