-- Requests whose credential is not yet known good for the quota they would spend: a proxied
-- Airtable request names its base in the path, so anyone who reaches the proxy could spend a
-- base's quota with any token at all. Such requests get a small allowance of their own
-- (src/proxy/credentials.ts says who is known): at most p_unverified of them per window, only
-- while nobody is queued for the key, and only while the window keeps a slot free after them,
-- so they never take the sync's share or a known client's turn. They never queue in
-- quota_waiting, so the sync never steps aside for them.
--
-- A sync's own credential is known good for its quota: its digest, for every kind (api_key_sha256
-- is kept only for kinds whose key names an account, where it also keeps one sync per key).
ALTER TABLE syncs ADD COLUMN credential_sha256 text;

ALTER TABLE quota_requests DROP CONSTRAINT quota_requests_kind_check;
ALTER TABLE quota_requests ADD CONSTRAINT quota_requests_kind_check CHECK (kind IN ('client', 'sync', 'urgent', 'unverified'));

-- The sync's share counts the sync's own requests only: before, everything but a client's.
CREATE OR REPLACE FUNCTION quota_take(
  p_key text,
  p_limit int,
  p_window_ms float8,
  p_share_window_ms float8,
  p_kind text,
  p_sync_limit int,
  p_token text,
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
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_key AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET p_limit - 1 LIMIT 1;
    granted := false;
    retry_in_ms := greatest(1, p_window_ms - age + 1);
  ELSIF p_kind <> 'client' THEN
    SELECT count(*) INTO logged FROM quota_requests q
     WHERE q.key = p_key AND q.kind IN ('sync', 'urgent') AND q.at > now_ts - make_interval(secs => p_share_window_ms / 1000.0);
    IF logged >= p_sync_limit THEN
      SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
       WHERE q.key = p_key AND q.kind IN ('sync', 'urgent') AND q.at > now_ts - make_interval(secs => p_share_window_ms / 1000.0)
       ORDER BY q.at DESC OFFSET p_sync_limit - 1 LIMIT 1;
      granted := false;
      retry_in_ms := greatest(1, p_share_window_ms - age + 1);
    ELSE
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
    INSERT INTO quota_waiting (key, token, until, rank)
    VALUES (p_key, p_token, clock_timestamp() + interval '2 seconds', p_rank)
    ON CONFLICT (key, token) DO UPDATE SET until = excluded.until;
  END IF;
  RETURN NEXT;
END
$$;

-- One unverified request's decision. p_also_key: the credential's own second quota (an
-- Airtable token's), or null; it is the credential's own, so it is spent as usual.
CREATE FUNCTION quota_take_unverified(
  p_key text,
  p_limit int,
  p_window_ms float8,
  p_unverified int,
  p_also_key text,
  p_also_limit int,
  p_also_window_ms float8
) RETURNS TABLE (granted boolean, retry_in_ms float8, at text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  now_ts timestamptz;
  logged int;
  mine int;
  age float8;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 7));
  IF p_also_key IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_also_key, 7));
  END IF;
  now_ts := clock_timestamp();
  granted := false;
  at := NULL;

  SELECT count(*), count(*) FILTER (WHERE q.kind = 'unverified') INTO logged, mine FROM quota_requests q
   WHERE q.key = p_key AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0);
  IF mine >= p_unverified THEN
    -- The allowance opens again when the oldest unverified request in the window leaves it.
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_key AND q.kind = 'unverified' AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET p_unverified - 1 LIMIT 1;
    retry_in_ms := greatest(1, p_window_ms - age + 1);
  ELSIF logged + 1 >= p_limit THEN
    -- Granting would leave no free slot in the window: a known client would find none.
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_key AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET greatest(p_limit - 2, 0) LIMIT 1;
    retry_in_ms := greatest(1, p_window_ms - coalesce(age, 0) + 1);
  ELSIF EXISTS (SELECT 1 FROM quota_waiting w WHERE w.key = p_key AND w.until > now_ts) THEN
    -- A known client or the sync's change capture is queued: it goes first.
    retry_in_ms := 50;
  ELSIF p_also_key IS NOT NULL AND (
    SELECT count(*) FROM quota_requests q
     WHERE q.key = p_also_key AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0)) >= p_also_limit THEN
    retry_in_ms := 50;
  ELSE
    granted := true;
    retry_in_ms := 0;
    INSERT INTO quota_requests (key, at, kind) VALUES (p_key, clock_timestamp(), 'unverified')
      RETURNING quota_requests.at::text INTO at;
    IF p_also_key IS NOT NULL THEN
      INSERT INTO quota_requests (key, at, kind) VALUES (p_also_key, at::timestamptz, 'unverified');
    END IF;
  END IF;
  RETURN NEXT;
END
$$;
