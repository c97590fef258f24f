-- Wait markers the decoders have reached (src/decoder/wait.ts), written in the statement that
-- sends the NOTIFY. A NOTIFY reaches only the processes listening at that moment; a waiter whose
-- LISTEN connection was being made again finds its marker here instead. Kept for ten minutes.
CREATE TABLE wait_markers_reached (
  token      text PRIMARY KEY,
  reached_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wait_markers_reached_at_idx ON wait_markers_reached (reached_at);
