-- Backfills on demand (docs/events.md, "Backfills"): the current rows of some collections
-- replayed into the event stream as `read` events, interleaved safely with live changes.
-- The sync's decoder process runs them, one at a time per sync, oldest first.
CREATE TABLE backfills (
  id             text PRIMARY KEY,
  sync_id        text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  account_id     text NOT NULL REFERENCES accounts (id),
  collections    text[] NOT NULL,
  -- Set: the reads go to this webhook destination alone, not to the topics.
  destination_id text REFERENCES webhook_destinations (id) ON DELETE CASCADE,
  state          text NOT NULL CHECK (state IN ('running', 'done', 'canceled', 'failed')),
  -- Rows read into the stream so far (a chunk read again after a crash counts again).
  rows           bigint NOT NULL DEFAULT 0,
  -- Where it stands: the collection being read (an index into collections) and the last
  -- record id read of it, in the table's key order. A restart goes on from here.
  position       int NOT NULL DEFAULT 0,
  last_key       text,
  error          text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz
);
CREATE INDEX backfills_sync_idx ON backfills (sync_id, created_at);
CREATE INDEX backfills_running_idx ON backfills (sync_id, created_at) WHERE state = 'running';

-- A read meant for one webhook destination only: logged in seq order with the rest, so that
-- the destination gets it in its place among live changes, but on no topic partition (-1),
-- so REST and Kafka readers never see it.
ALTER TABLE events ADD COLUMN destination_id text;
