-- The event log: every committed row change of every sync database, made durable by the
-- decoder before it acknowledges the WAL position (DESIGN.md rule 4). REST readers, the
-- webhook deliverer and the Kafka relay all read from here.

-- A topic per (sync, collection); its partitions and their next offsets.
CREATE TABLE event_topics (
  topic       text PRIMARY KEY,
  sync_id     text NOT NULL,
  account_id  text NOT NULL REFERENCES accounts (id),
  collection  text NOT NULL,
  partitions  int NOT NULL CHECK (partitions > 0),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_topics_account_idx ON event_topics (account_id);
CREATE INDEX event_topics_sync_idx ON event_topics (sync_id);

-- Kept apart from the events themselves, so that offsets never restart when retention
-- has dropped every event of a partition.
CREATE TABLE event_partitions (
  topic       text NOT NULL REFERENCES event_topics (topic) ON DELETE CASCADE,
  partition   int NOT NULL,
  next_offset bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (topic, partition)
);

-- seq: per sync, the order in which the decoder logged events (commit order, then position
-- in the commit). offset: per (topic, partition), Kafka-style. event_key: the idempotency key,
-- derived from (commit LSN, position in commit), the same however often a change is decoded.
-- Partitioned by day so that retention drops whole tables instead of deleting rows.
CREATE TABLE events (
  sync_id     text NOT NULL,
  seq         bigint NOT NULL,
  topic       text NOT NULL,
  partition   int NOT NULL,
  "offset"    bigint NOT NULL,
  record_id   text NOT NULL,
  event_key   text NOT NULL,
  created_at  timestamptz NOT NULL,
  value       text NOT NULL
) PARTITION BY RANGE (created_at);
CREATE INDEX events_topic_offset_idx ON events (topic, partition, "offset");
CREATE INDEX events_sync_seq_idx ON events (sync_id, seq);

-- Where each sync's decoder stands: the commit LSN of the last transaction whose events
-- are all in the log, and the last seq given out. Written in the same transaction as the events.
CREATE TABLE decoder_progress (
  sync_id     text PRIMARY KEY,
  lsn         pg_lsn NOT NULL,
  seq         bigint NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  -- Reported by the running decoder every few seconds: what the slot has been told, and how
  -- far the server's WAL is ahead of it (bytes), for status and metrics.
  acked_lsn      pg_lsn,
  slot_lag_bytes bigint,
  lag_at         timestamptz
);

-- Each sync's decoder runs in one process at a time (its slot admits one reader): leased
-- like the sync itself, but apart from it, so that the two can run in different processes.
ALTER TABLE syncs
  ADD COLUMN decoder_lease_owner text,
  ADD COLUMN decoder_lease_until timestamptz;
