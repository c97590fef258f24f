-- How far behind each delivery path of a sync is (the status, src/control/status.ts): the
-- logging time of the oldest event the path has not delivered yet, or no row when it has
-- delivered everything. The Kafka relay's path is behind from the first event past its cursor
-- (a sync with no cursor has no relay; p_kafka false, the service relays to no Kafka now, and a
-- cursor left from when it did is no path); each enabled webhook's from the first event past its
-- cursor, the first unfinished delivery row, or the first event of a lane that fell behind,
-- whichever comes first (an unfinished row by its own copy of the event's time). Replayed rows
-- are extra deliveries someone asked for, not the live path, and a recover that moved the
-- cursor back counts from when it was asked, not from the events it sends again.
ALTER TABLE webhook_destinations ADD COLUMN recovered_at timestamptz;

CREATE FUNCTION delivery_behind(p_sync_ids text[], p_kafka boolean)
RETURNS TABLE (sync_id text, path text, since timestamptz, failing_since timestamptz, last_error text)
LANGUAGE sql STABLE AS $$
  SELECT k.sync_id, 'kafka', e.created_at, NULL::timestamptz, NULL::text
    FROM kafka_relay_cursors k
    CROSS JOIN LATERAL (
      SELECT created_at FROM events e
       WHERE e.sync_id = k.sync_id AND e.seq > k.seq AND e.destination_id IS NULL
       ORDER BY e.seq LIMIT 1) e
   WHERE p_kafka AND k.sync_id = ANY (p_sync_ids)
  UNION ALL
  SELECT d.sync_id, 'webhook ' || d.id, greatest(least(e.created_at, u.oldest), d.recovered_at), d.failing_since,
         (SELECT coalesce(x.last_error, 'HTTP ' || x.last_status_code) FROM webhook_deliveries x
           WHERE x.destination_id = d.id AND x.status = 'retrying' ORDER BY x.seq LIMIT 1)
    FROM webhook_destinations d
    -- Unfinished rows carry their event's time: the event itself may be past retention.
    CROSS JOIN LATERAL (
      SELECT min(x.event_created_at) AS oldest FROM webhook_deliveries x
       WHERE x.destination_id = d.id AND x.status IN ('pending', 'retrying') AND x.replays = 0) u
    CROSS JOIN LATERAL (
      SELECT least(
        d.cursor_seq + 1,
        (SELECT min(l.after_seq) + 1 FROM webhook_lanes l WHERE l.destination_id = d.id AND NOT l.released)) AS first_seq) f
    LEFT JOIN LATERAL (
      SELECT created_at FROM events e
       WHERE e.sync_id = d.sync_id AND e.seq >= f.first_seq AND (e.destination_id IS NULL OR e.destination_id = d.id)
       ORDER BY e.seq LIMIT 1) e ON true
   WHERE d.sync_id = ANY (p_sync_ids) AND d.disabled_at IS NULL AND (e.created_at IS NOT NULL OR u.oldest IS NOT NULL)
$$;
