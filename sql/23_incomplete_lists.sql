-- The lists a sync cannot read completely right now, and why: a list whose reads wait out a
-- rate limit or fail upstream (until its next page is read), or one the key may not read
-- (until a read of it succeeds). Each entry: {"list","table","reason","since"}. The runner
-- replaces the whole array when it changes; the API's status and the console show it.
ALTER TABLE syncs ADD COLUMN incomplete jsonb NOT NULL DEFAULT '[]';
