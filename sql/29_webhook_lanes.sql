-- Webhook lanes that fell behind. When a lane's head fails (or replays wait for it), the lane
-- stops taking events from the destination's reader and reads its own from the event log
-- later, from after_seq on: every event of the lane up to after_seq is delivered, or has a row
-- in webhook_deliveries (the retrying head, an exhausted event). The destination's cursor_seq
-- then moves on for the other lanes. So a destination that fails costs one row per lane and a
-- write per attempt, not a row per queued event: events wait in the log, where they already
-- are (and, like the destination's cursor, within its retention).
-- released: the lane caught up and works from the reader again; the row goes once cursor_seq
-- has passed after_seq. lane_count: the lane count the row was written under (lanes.ts).
CREATE TABLE webhook_lanes (
  destination_id text NOT NULL REFERENCES webhook_destinations (id) ON DELETE CASCADE,
  lane           int NOT NULL,
  lane_count     int NOT NULL,
  after_seq      bigint NOT NULL,
  released       boolean NOT NULL DEFAULT false,
  PRIMARY KEY (destination_id, lane)
);
