-- Held for migration 19 of another branch, so that this branch's 20 is consecutive.
-- Drop this file when that branch's migration 19 is merged.
SELECT 1;
