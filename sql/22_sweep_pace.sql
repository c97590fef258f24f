-- While change capture is healthy and the latest cycle found nothing it had missed, an
-- Airtable sync spreads its next cycle's requests over about this many seconds instead of
-- sweeping at the full pace of its quota; NULL: full pace. The API, the console and the
-- indicator (a paced cycle is not "slower than usual") read it.
ALTER TABLE syncs ADD COLUMN paced_cycle_s integer;
