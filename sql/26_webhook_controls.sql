-- What a webhook's owner controls beyond its URL and topics (docs/events.md#webhooks):
-- which events it takes, its signing secret's rotation, whether it is enabled, how far back
-- it is delivered again, and how fast it may be sent to.

ALTER TABLE webhook_destinations
  -- {"events"?,"changed"?,"where"?} (src/events/webhooks/filter.ts); NULL: every event of its topics.
  ADD COLUMN filter                jsonb,
  -- Attempts per second across all its lanes; NULL: as fast as the lanes go.
  ADD COLUMN max_per_second        int CHECK (max_per_second BETWEEN 1 AND 10000),
  -- After a rotation: the secret before it, sealed with its own associated data, and until
  -- when deliveries are also signed with it. secret_version tells a running deliverer to
  -- load the secrets again.
  ADD COLUMN previous_secret_enc   text,
  ADD COLUMN previous_secret_until timestamptz,
  ADD COLUMN secret_version        bigint NOT NULL DEFAULT 0,
  -- Disabled (by a 410 Gone, by failing every attempt for days, or by request): nothing is
  -- sent, the cursor stays where it was, and re-enabling resumes from it.
  ADD COLUMN disabled_at           timestamptz,
  ADD COLUMN disabled_reason       text,
  -- Since when every attempt has failed (NULL after any success): past the operator's limit
  -- the destination is disabled. Kept here so that a restart does not start the count again.
  ADD COLUMN failing_since         timestamptz,
  -- Bumped when the cursor is moved back (recover): a deliverer saves its progress only for
  -- the generation it started with, and restarts its worker when it sees a newer one.
  ADD COLUMN cursor_generation     bigint NOT NULL DEFAULT 0,
  ADD CONSTRAINT webhook_destinations_disabled_check CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL)),
  ADD CONSTRAINT webhook_destinations_previous_check CHECK ((previous_secret_enc IS NULL) = (previous_secret_until IS NULL));
