-- Signed notifications already taken, by kinds that sign a time and refuse one older than five
-- minutes (Stripe): the same delivery again, at any API process, is a replay and wakes nothing.
-- Rows past the window are pruned as new ones come.
CREATE TABLE hook_replays (
  key text PRIMARY KEY,
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hook_replays_seen_at ON hook_replays (seen_at);
