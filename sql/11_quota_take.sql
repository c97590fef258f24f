-- One quota decision in one round trip. The limiter used to run begin, advisory lock, window
-- read, waiting check, insert and commit as separate statements (five or six round trips to
-- the control database on every upstream request); a proxied write paid them all before
-- leaving. The rules are unchanged, see src/quota/limiter.ts.
--
-- The advisory lock is transaction-scoped, so it holds until the calling statement's
-- implicit transaction commits: two processes never both take the last slot of a window.
-- Both tables are unlogged, so the commit writes no WAL and never waits for the disk.
CREATE FUNCTION quota_take(
  p_key text,
  p_limit int,
  p_window_ms float8,       -- the upstream's window plus the margin
  p_share_window_ms float8, -- the sync's share is kept over the exact window
  p_kind text,              -- 'client' | 'sync' | 'urgent'
  p_sync_limit int,
  p_token text,             -- a queued request's token (clients and urgent sync requests), or null
  p_rank int
) RETURNS TABLE (granted boolean, retry_in_ms float8, at text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  now_ts timestamptz;
  logged int;
  age float8;
  ahead int;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 7));
  now_ts := clock_timestamp();

  SELECT count(*) INTO logged FROM quota_requests q
   WHERE q.key = p_key AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0);
  IF logged >= p_limit THEN
    -- One more slot opens when the limit-th newest request leaves the window.
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_key AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET p_limit - 1 LIMIT 1;
    granted := false;
    retry_in_ms := greatest(1, p_window_ms - age + 1);
  ELSIF p_kind <> 'client' THEN
    SELECT count(*) INTO logged FROM quota_requests q
     WHERE q.key = p_key AND q.kind <> 'client' AND q.at > now_ts - make_interval(secs => p_share_window_ms / 1000.0);
    IF logged >= p_sync_limit THEN
      SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
       WHERE q.key = p_key AND q.kind <> 'client' AND q.at > now_ts - make_interval(secs => p_share_window_ms / 1000.0)
       ORDER BY q.at DESC OFFSET p_sync_limit - 1 LIMIT 1;
      granted := false;
      retry_in_ms := greatest(1, p_share_window_ms - age + 1);
    ELSE
      -- Step aside for anyone queued ahead of this request's rank; but a sweep that has had
      -- no slot in this window takes one, so change capture cannot starve it.
      ahead := CASE
        WHEN p_kind = 'urgent' THEN 1
        WHEN EXISTS (SELECT 1 FROM quota_requests q
                      WHERE q.key = p_key AND q.kind = 'sync'
                        AND q.at > now_ts - make_interval(secs => p_share_window_ms / 1000.0)) THEN 2
        ELSE 1
      END;
      IF EXISTS (SELECT 1 FROM quota_waiting w
                  WHERE w.key = p_key AND w.until > now_ts AND w.rank < ahead AND w.token <> coalesce(p_token, '')) THEN
        granted := false;
        retry_in_ms := 25;
      ELSE
        granted := true;
      END IF;
    END IF;
  ELSE
    granted := true;
  END IF;

  IF granted THEN
    retry_in_ms := 0;
    INSERT INTO quota_requests (key, at, kind) VALUES (p_key, clock_timestamp(), p_kind)
      RETURNING quota_requests.at::text INTO at;
  ELSIF p_token IS NOT NULL THEN
    -- Announce the queued request so lower ranks hold back until it has gone.
    INSERT INTO quota_waiting (key, token, until, rank)
    VALUES (p_key, p_token, clock_timestamp() + interval '2 seconds', p_rank)
    ON CONFLICT (key, token) DO UPDATE SET until = excluded.until;
  END IF;
  RETURN NEXT;
END
$$;
