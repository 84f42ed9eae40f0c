-- Staged files (issue 35): what a job submitted with fsub -M --stage-in
-- takes to its cluster ('in') and what comes back from its directory there
-- when it ends ('out'), fetched with fjobs -M --fetch. Paths are relative
-- to the job's directory (protocol/staged_files.hpp's rule, checked before
-- a row is written). A job's inputs are deleted once its outputs are back
-- (or failed to come); its outputs stay with the job's record and may be
-- fetched again.
CREATE TABLE faucets_staged_files (
  job_id     bigint NOT NULL REFERENCES faucets_jobs (id),
  direction  text NOT NULL CHECK (direction IN ('in', 'out')),
  path       text NOT NULL CHECK (path <> '' AND left(path, 1) <> '/'),
  mode       integer NOT NULL CHECK (mode BETWEEN 0 AND 511),
  data       bytea NOT NULL,
  PRIMARY KEY (job_id, direction, path)
);

-- One row per job that staged files: whether its outputs came back, or why
-- not (the cluster's one line: over its limit, the directory gone).
CREATE TABLE faucets_stage_results (
  job_id       bigint PRIMARY KEY REFERENCES faucets_jobs (id),
  outputs      text NOT NULL DEFAULT 'waiting' CHECK (outputs IN ('waiting', 'back', 'failed')),
  detail       text NOT NULL DEFAULT '',
  in_bytes     bigint NOT NULL DEFAULT 0,
  out_bytes    bigint NOT NULL DEFAULT 0,
  time         timestamptz NOT NULL DEFAULT now()
);
