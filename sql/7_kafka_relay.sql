-- The Kafka relay's cursor: per sync, the seq of the last event the broker has acknowledged.
-- Advanced only after the acknowledgement, so a crash resends (at-least-once) but never skips.
CREATE TABLE kafka_relay_cursors (
  sync_id     text PRIMARY KEY,
  seq         bigint NOT NULL CHECK (seq >= 0),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
