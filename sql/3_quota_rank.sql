-- Who is queued for a key, by rank: 0 a client (proxy) request, 1 a sync's change capture.
-- A request steps aside while anyone of a lower rank waits; sweeps (rank 2) never queue here.
ALTER TABLE quota_waiting ADD COLUMN rank smallint NOT NULL DEFAULT 0;

-- Urgent sync requests are logged as such, so sweeps can be promised one slot per window
-- however much change capture there is.
ALTER TABLE quota_requests DROP CONSTRAINT quota_requests_kind_check;
ALTER TABLE quota_requests ADD CONSTRAINT quota_requests_kind_check CHECK (kind IN ('client', 'sync', 'urgent'));
