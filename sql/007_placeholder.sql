-- 007_placeholder: ONLY so that this branch (cluster-id) builds on its own:
-- migration 007 belongs to another branch. DELETE THIS FILE when merging
-- that branch's sql/007_*.sql (two 007 files fail the build, by design of
-- cmake/embed_sql.cmake, so it cannot be forgotten).
DO $$ BEGIN END $$;
