-- 010_job_measurements: what each job's processes used, as its node agents
-- measured it when they ended there (issue 32): CPU time (user and system,
-- microseconds) and the peak resident memory of the largest process (KiB).
-- One row per job and node (a job on several nodes reports from each: the
-- batch host and the nodes of its steps); a second report from the same node
-- replaces the first. A requeued job's next run reports again: rows older
-- than the job's start_time belong to an earlier run and are not counted.
-- No row: nothing was measured (the agent's step was killed with it), and
-- sacct's TotalCPU and MaxRSS stay empty. Kept when the job's row is purged,
-- as usage_records are.
CREATE TABLE job_measurements (
  job_id         bigint NOT NULL,
  node           text NOT NULL,
  user_cpu_us    bigint NOT NULL CHECK (user_cpu_us >= 0),
  system_cpu_us  bigint NOT NULL CHECK (system_cpu_us >= 0),
  max_rss_kb     bigint NOT NULL CHECK (max_rss_kb >= 0),
  recorded_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, node)
);
