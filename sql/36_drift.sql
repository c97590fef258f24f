-- Drift (docs/stripe.md#the-audit, docs/airtable.md#drift): what a comparison of the
-- database with the upstream found that change capture had not brought, and fixed.
-- sync_comparisons: when each table was last compared whole. sync_drift: one row per table
-- and comparison that found something (rows missing, extra, or differing), kept a week.
-- sync_audits: a Stripe sync's audit rounds: the one under way (round_started_at), and the last
-- completed one.
CREATE TABLE sync_comparisons (
  sync_id     text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  tbl         text NOT NULL,
  compared_at timestamptz NOT NULL,
  PRIMARY KEY (sync_id, tbl)
);
CREATE TABLE sync_drift (
  sync_id   text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  tbl       text NOT NULL,
  found_at  timestamptz NOT NULL DEFAULT now(),
  source    text NOT NULL CHECK (source IN ('audit', 'sweep')),
  missing   integer NOT NULL DEFAULT 0,
  differing integer NOT NULL DEFAULT 0,
  extra     integer NOT NULL DEFAULT 0
);
CREATE INDEX sync_drift_sync_idx ON sync_drift (sync_id, found_at);
CREATE TABLE sync_audits (
  sync_id          text PRIMARY KEY REFERENCES syncs (id) ON DELETE CASCADE,
  round_started_at timestamptz NOT NULL,
  last_started_at  timestamptz,
  last_completed_at timestamptz,
  last_round_ms    bigint,
  share_per_second integer NOT NULL
);
