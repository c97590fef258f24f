-- Who is queued for a key, by rank: 0 a client (proxy) request, 1 a sync's change capture.
-- A request steps aside while anyone of a lower rank waits; sweeps (rank 2) never queue here.
ALTER TABLE quota_waiting ADD COLUMN rank smallint NOT NULL DEFAULT 0;
