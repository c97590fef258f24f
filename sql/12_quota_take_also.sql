-- A request that counts against two quotas at once: an Airtable request counts against its
-- base (5 req/s) and against its token (50 req/s across every base it reaches). Granted only
-- when both have room; then logged under both keys at the same time, so one re-stamp moves
-- both (src/quota/limiter.ts).
--
-- Locks: the request's own key first (quota_take takes it again; transaction-scoped advisory
-- locks are re-entrant), then the other one. A token key is only ever taken second, or alone
-- (proxied requests that name no base), so no two decisions wait on each other in a cycle.
CREATE FUNCTION quota_take_also(
  p_key text,
  p_limit int,
  p_window_ms float8,
  p_share_window_ms float8,
  p_kind text,
  p_sync_limit int,
  p_token text,
  p_rank int,
  p_also_key text,
  p_also_limit int,
  p_also_window_ms float8
) RETURNS TABLE (granted boolean, retry_in_ms float8, at text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  now_ts timestamptz;
  logged int;
  age float8;
  decision record;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 7));
  PERFORM pg_advisory_xact_lock(hashtextextended(p_also_key, 7));
  now_ts := clock_timestamp();
  SELECT count(*) INTO logged FROM quota_requests q
   WHERE q.key = p_also_key AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0);
  IF logged >= p_also_limit THEN
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_also_key AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET p_also_limit - 1 LIMIT 1;
    granted := false;
    retry_in_ms := greatest(1, p_also_window_ms - age + 1);
    at := NULL;
    RETURN NEXT;
    RETURN;
  END IF;

  SELECT * INTO decision FROM quota_take(p_key, p_limit, p_window_ms, p_share_window_ms, p_kind, p_sync_limit, p_token, p_rank);
  granted := decision.granted;
  retry_in_ms := decision.retry_in_ms;
  at := decision.at;
  IF decision.granted THEN
    INSERT INTO quota_requests (key, at, kind) VALUES (p_also_key, decision.at::timestamptz, p_kind);
  END IF;
  RETURN NEXT;
END
$$;
