-- Read-after-write (the wait endpoint, DESIGN rule 6), and upstream refusals for /metrics.
-- Both times are read from this server's clock (clock_timestamp()), never a process's, so
-- processes on different machines compare them safely.
ALTER TABLE syncs
  -- When the latest wait request for the sync arrived. A runner that sees it ahead of
  -- confirmed_through records its next completed pass (and NOTIFY tributary_passes).
  ADD COLUMN pass_wanted_at timestamptz,
  -- The start of the latest sync pass known to have completed: everything upstream had
  -- before this moment is in the sync database. Only moves forward.
  ADD COLUMN confirmed_through timestamptz,
  -- 429 answers to the sync's own upstream requests (a counter: Prometheus rate()s it).
  ADD COLUMN upstream_429s bigint NOT NULL DEFAULT 0;
