-- How far behind the event log is, in time: every change committed on the sync's server before
-- logged_through is in the log. The decoder's slot-lag report sets it from its own samples of
-- the server's WAL position (the latest sample the slot's confirmed position has reached), so
-- a decoder that stops, or stops reporting, leaves it behind and the sync's status says so.
ALTER TABLE decoder_progress ADD COLUMN logged_through timestamptz;
