-- The submitter's umask, captured by fsub/frun at submission (as Slurm does)
-- and applied by the node agent before it creates the job's output files and
-- starts it. Jobs stored before this column, and clients that send none,
-- get 0022 (18), what the agent always used.
ALTER TABLE jobs ADD COLUMN umask integer NOT NULL DEFAULT 18 CHECK (umask BETWEEN 0 AND 511);
