-- Notifications an upstream pushes to us about a sync (Airtable's webhook pings, sent to
-- TRIBUTARY_PUBLIC_URL when it is set): the upstream's id of the hook, and the secret it
-- signs them with, sealed like every other secret. A notification that checks out only
-- wakes the sync's runner (PING_CHANNEL), which then reads the changes itself: a forged or
-- replayed one can cost a read, never a wrong row.
ALTER TABLE syncs ADD COLUMN hook_id text, ADD COLUMN hook_secret_enc text;
