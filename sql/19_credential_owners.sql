-- Airtable's second limit is per user, not per token: 50 requests a second for all traffic of
-- one user's (or service account's) personal access tokens together, across bases. A user who
-- makes one token per base used to get 50 a second per token from the limiter, so 17 bases
-- of one user went over the real limit and locked all of that user's bases out for 30 s.

-- Who owns a credential, learned once from the upstream (Airtable: GET /v0/meta/whoami) and
-- kept by the credential's SHA-256 (as syncs.credential_sha256), never the credential, so every
-- process counts the credential's requests under its owner's quota. An owner never changes.
CREATE TABLE credential_owners (
  kind text NOT NULL,
  credential_sha256 text NOT NULL,
  owner_id text NOT NULL,
  learned_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, credential_sha256)
);
CREATE INDEX credential_owners_owner ON credential_owners (kind, owner_id);

-- A limit shared with other syncs that held this sync back (Airtable: the user's 50 requests a
-- second), in words, and when that was last seen: the API and the console say so for a minute.
ALTER TABLE syncs ADD COLUMN slowed_by text, ADD COLUMN slowed_at timestamptz;

-- The second quota's line is first come, first served within a rank, so the syncs of one user
-- share the user's quota fairly when it is the binding limit: when each waiter first queued.
ALTER TABLE quota_waiting ADD COLUMN since timestamptz NOT NULL DEFAULT clock_timestamp();

-- A request that counts against its base and its owner's quota. Before, the second quota was
-- only checked: whoever asked first when a slot opened took it, so with many syncs waiting on
-- one user some went without for long, and every freed slot drew all of them at once. Now a
-- request refused by the second quota queues for it (quota_waiting, with its rank: clients 0,
-- urgent sync requests 1, sweeps 2), and a slot of it goes to the first in line of the lowest
-- rank. Each waiter looks again when its own turn can come, not when the next slot opens.
--
-- p_also_sync_limit: the syncs' share of the second quota (null: all of it), kept like the
-- limit itself over the window plus the margin. It leaves room for requests this quota cannot
-- see coming: a token's first request before its user is known (a new sync's whoami) and the
-- user's own requests straight to the upstream.
--
-- As for a base (sql/3), change capture cannot starve sweeps: a sweep whose base has had no
-- sweep slot for five windows stands in the line with the urgent requests, first come, first
-- served. (Not after one window, as for a base: with many bases nearly every sweep would, and
-- change capture would wait behind the sweeps.)
--
-- held_by_also: refused because of the second quota (the sync says it is slowed by it). A
-- request refused by its base leaves the second quota's line: it waits for its base, and
-- holding a place there would keep the others from slots it cannot use.
DROP FUNCTION quota_take_also(text, int, float8, float8, text, int, text, int, text, int, float8);
CREATE FUNCTION quota_take_also(
  p_key text,
  p_limit int,
  p_window_ms float8,
  p_share_window_ms float8,
  p_kind text,
  p_sync_limit int,
  p_token text,             -- this request's place in the lines, or null
  p_rank int,
  p_also_key text,
  p_also_limit int,
  p_also_window_ms float8,
  p_also_sync_limit int
) RETURNS TABLE (granted boolean, retry_in_ms float8, at text, held_by_also boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  now_ts timestamptz;
  logged int;
  logged_sync int;
  ahead int;
  ahead_sync int;
  my_rank int;
  my_since timestamptz;
  age float8;
  wait_ms float8;
  decision record;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 7));
  PERFORM pg_advisory_xact_lock(hashtextextended(p_also_key, 7));
  now_ts := clock_timestamp();
  held_by_also := false;
  retry_in_ms := 0;
  my_rank := CASE p_kind WHEN 'client' THEN 0 WHEN 'urgent' THEN 1 ELSE 2 END;
  IF my_rank = 2 AND NOT EXISTS (SELECT 1 FROM quota_requests q
                                  WHERE q.key = p_key AND q.kind = 'sync'
                                    AND q.at > now_ts - make_interval(secs => 5 * p_share_window_ms / 1000.0)) THEN
    my_rank := 1;
  END IF;

  -- Who is ahead in the second quota's line: a lower rank, or the same rank queued earlier.
  SELECT w.since INTO my_since FROM quota_waiting w WHERE w.key = p_also_key AND w.token = p_token;
  SELECT count(*), count(*) FILTER (WHERE w.rank >= 1) INTO ahead, ahead_sync FROM quota_waiting w
   WHERE w.key = p_also_key AND w.until > now_ts AND w.token <> coalesce(p_token, '')
     AND (w.rank < my_rank OR (w.rank = my_rank AND w.since < coalesce(my_since, now_ts)));
  SELECT count(*), count(*) FILTER (WHERE q.kind IN ('sync', 'urgent')) INTO logged, logged_sync FROM quota_requests q
   WHERE q.key = p_also_key AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0);

  IF logged + ahead >= p_also_limit THEN
    -- This request's turn: once the slots for those ahead and one more have left the window
    -- (more ahead than a window holds: not before the window has turned over).
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_also_key AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0)
     ORDER BY q.at ASC OFFSET logged + ahead - p_also_limit LIMIT 1;
    held_by_also := true;
    retry_in_ms := CASE WHEN age IS NULL THEN p_also_window_ms ELSE greatest(1, p_also_window_ms - age + 1) END;
  END IF;
  IF my_rank >= 1 AND p_also_sync_limit IS NOT NULL AND logged_sync + ahead_sync >= p_also_sync_limit THEN
    -- The same within the syncs' share, counting only sync requests and the syncs ahead.
    age := NULL;
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_also_key AND q.kind IN ('sync', 'urgent') AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0)
     ORDER BY q.at ASC OFFSET logged_sync + ahead_sync - p_also_sync_limit LIMIT 1;
    held_by_also := true;
    wait_ms := CASE WHEN age IS NULL THEN p_also_window_ms ELSE greatest(1, p_also_window_ms - age + 1) END;
    retry_in_ms := greatest(retry_in_ms, wait_ms);
  END IF;

  IF held_by_also THEN
    granted := false;
    at := NULL;
    IF p_token IS NOT NULL THEN
      INSERT INTO quota_waiting (key, token, until, rank)
      VALUES (p_also_key, p_token, now_ts + make_interval(secs => (retry_in_ms + 2000) / 1000.0), my_rank)
      ON CONFLICT (key, token) DO UPDATE SET until = excluded.until, rank = excluded.rank;
    END IF;
    RETURN NEXT;
    RETURN;
  END IF;

  -- Sweeps never queue for the base (sql/3): only clients and urgent requests pass their token.
  SELECT * INTO decision FROM quota_take(p_key, p_limit, p_window_ms, p_share_window_ms, p_kind, p_sync_limit,
                                         CASE WHEN p_kind IN ('client', 'urgent') THEN p_token END, p_rank);
  granted := decision.granted;
  retry_in_ms := decision.retry_in_ms;
  at := decision.at;
  IF p_token IS NOT NULL THEN
    DELETE FROM quota_waiting w WHERE w.key = p_also_key AND w.token = p_token;
  END IF;
  IF decision.granted THEN
    INSERT INTO quota_requests (key, at, kind) VALUES (p_also_key, decision.at::timestamptz, p_kind);
  END IF;
  RETURN NEXT;
END
$$;

-- Unverified requests (sql/16) also step aside for anyone queued for the credential's second quota.
CREATE OR REPLACE FUNCTION quota_take_unverified(
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
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_key AND q.kind = 'unverified' AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET p_unverified - 1 LIMIT 1;
    retry_in_ms := greatest(1, p_window_ms - age + 1);
  ELSIF logged + 1 >= p_limit THEN
    SELECT extract(epoch FROM now_ts - q.at) * 1000 INTO age FROM quota_requests q
     WHERE q.key = p_key AND q.at > now_ts - make_interval(secs => p_window_ms / 1000.0)
     ORDER BY q.at DESC OFFSET greatest(p_limit - 2, 0) LIMIT 1;
    retry_in_ms := greatest(1, p_window_ms - coalesce(age, 0) + 1);
  ELSIF EXISTS (SELECT 1 FROM quota_waiting w WHERE w.key = p_key AND w.until > now_ts) THEN
    retry_in_ms := 50;
  ELSIF p_also_key IS NOT NULL AND (
    EXISTS (SELECT 1 FROM quota_waiting w WHERE w.key = p_also_key AND w.until > now_ts)
    OR (SELECT count(*) FROM quota_requests q
         WHERE q.key = p_also_key AND q.at > now_ts - make_interval(secs => p_also_window_ms / 1000.0)) >= p_also_limit) THEN
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
