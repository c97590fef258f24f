-- The console (src/console/): sign-in sessions, and the short history its pages draw.

-- A console session: made by POST /console/session with an API token, carried by an
-- HttpOnly SameSite=Strict cookie. Only the SHA-256 of the session id is kept, so a copy
-- of this table signs nobody in. account_id NULL is the operator (admin token); its
-- sessions end when the admin token changes (admin_token_sha256 no longer matches).
-- csrf_token must come back in X-CSRF-Token on every state-changing request.
CREATE TABLE console_sessions (
  id_sha256          text PRIMARY KEY,
  account_id         text REFERENCES accounts (id) ON DELETE CASCADE,
  admin_token_sha256 text,
  csrf_token         text NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  last_seen_at       timestamptz NOT NULL DEFAULT now(),
  expires_at         timestamptz NOT NULL,
  CHECK ((account_id IS NULL) = (admin_token_sha256 IS NOT NULL))
);
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);

-- A day of each sync's cycles, for the console's lag and cycle-time chart: the sync's
-- StatusReporter writes one sample every 5 s at most (a Stripe sync completes a cycle at each
-- read of the events feed) and prunes samples older than a day.
CREATE TABLE sync_cycles (
  sync_id    text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  at         timestamptz NOT NULL,       -- completion of the sample's last cycle
  cycles     int NOT NULL,               -- cycles completed since the previous sample
  lag_s      double precision NOT NULL,  -- worst lag: a completion minus the previous cycle's start
  duration_s double precision NOT NULL,  -- longest cycle
  PRIMARY KEY (sync_id, at)
);

-- Failed cycle attempts of the last day (the console's "recent errors"); pruned like sync_cycles.
CREATE TABLE sync_errors (
  sync_id  text NOT NULL REFERENCES syncs (id) ON DELETE CASCADE,
  at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  kind     text NOT NULL CHECK (kind IN ('transient', 'fatal')),
  message  text NOT NULL
);
CREATE INDEX sync_errors_sync_at_idx ON sync_errors (sync_id, at);
