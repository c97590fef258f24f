-- Webhook destinations and their delivery log (CONTRACT §3, §7).
--
-- Write cost: an event delivered on its first attempt writes nothing of its own. Each
-- destination keeps a durable cursor (cursor_seq, with running counters) that the
-- deliverer saves at most every ~100 ms. A row in webhook_deliveries exists only for an
-- event whose first attempt failed, for the events queued behind it in the same lane
-- (status pending), and for replays; it carries a copy of the event, so retries,
-- exhausted deliveries and replays do not depend on the event log's retention.

CREATE TABLE webhook_destinations (
  id                text PRIMARY KEY,
  sync_id           text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  account_id        text NOT NULL REFERENCES accounts (id),
  url               text NOT NULL,
  topics            text[] NOT NULL,
  -- The Standard Webhooks secret, sealed with SecretBox (src/control/secrets.ts).
  secret_enc        text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  -- Every subscribed event of the sync with seq <= cursor_seq has a final outcome
  -- (delivered, or a row in webhook_deliveries). Starts at the log's end at creation.
  cursor_seq        bigint NOT NULL,
  cursor_at         timestamptz,
  -- Bumped by a replay request, so the deliverer knows to look for replayed rows.
  replay_generation bigint NOT NULL DEFAULT 0,
  delivered_count   bigint NOT NULL DEFAULT 0,
  failed_attempts   bigint NOT NULL DEFAULT 0,
  last_delivered_at timestamptz,
  last_failed_at    timestamptz
);
CREATE INDEX webhook_destinations_sync_idx ON webhook_destinations (sync_id);

-- status: pending (queued behind a failing delivery of the same lane, or replayed),
-- retrying, delivered (after at least one failure or a replay), exhausted (gave up; kept
-- until replayed or the destination is deleted).
-- lane: which of the deliverer's serial lanes the record hashes to (see lanes.ts).
CREATE TABLE webhook_deliveries (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  destination_id    text NOT NULL REFERENCES webhook_destinations (id) ON DELETE CASCADE,
  seq               bigint NOT NULL,
  lane              int NOT NULL,
  topic             text NOT NULL,
  record_id         text NOT NULL,
  event_key         text NOT NULL,
  event_created_at  timestamptz NOT NULL,
  value             text NOT NULL,
  status            text NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'exhausted')),
  attempts          int NOT NULL DEFAULT 0,
  replays           int NOT NULL DEFAULT 0,
  last_status_code  int,
  last_error        text,
  first_attempt_at  timestamptz,
  last_attempt_at   timestamptz,
  next_attempt_at   timestamptz,
  finished_at       timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (destination_id, seq)
);
-- The deliverer's queue: each lane's unfinished rows in log order.
CREATE INDEX webhook_deliveries_queue_idx ON webhook_deliveries (destination_id, lane, seq)
  WHERE status IN ('pending', 'retrying');
-- The API's log, optionally by status.
CREATE INDEX webhook_deliveries_log_idx ON webhook_deliveries (destination_id, id);
CREATE INDEX webhook_deliveries_status_idx ON webhook_deliveries (destination_id, status, id);
