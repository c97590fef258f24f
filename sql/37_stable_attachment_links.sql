-- Airtable's setting stable_attachment_links (docs/airtable.md#attachments), off for the syncs
-- made before it: a sync's settings always hold every setting of its kind.
UPDATE syncs SET settings = settings || '{"stable_attachment_links": false}'::jsonb
 WHERE kind = 'airtable' AND NOT settings ? 'stable_attachment_links';
