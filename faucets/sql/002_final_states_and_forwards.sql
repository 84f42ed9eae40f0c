-- faucetsd's final states come from the core's one list (core/job_state),
-- bound into every query, no longer copied into SQL: 001's partial index named
-- five of them and not OUT_OF_MEMORY, so it is replaced by a plain one.
DROP INDEX IF EXISTS faucets_jobs_live;
CREATE INDEX faucets_jobs_state ON faucets_jobs (state);

-- Every forward faucetsd sent: which cluster got which attempt of a job. A
-- cluster is believed about a job that is not placed there only when this
-- table says faucetsd forwarded it that job (issue 28: a cluster with a valid
-- key could otherwise claim and "complete" any job waiting at the server).
CREATE TABLE faucets_forwards (
  job_id   bigint NOT NULL REFERENCES faucets_jobs (id),
  cluster  text NOT NULL,
  attempt  integer NOT NULL,
  time     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, cluster, attempt)
);
-- The forwards sent before this table: the n-th "dispatched" event of a job
-- is its attempt n, its detail "to CLUSTER as ...".
INSERT INTO faucets_forwards (job_id, cluster, attempt, time)
SELECT job_id, substring(detail FROM '^to (\S+) '), n, time
  FROM (SELECT job_id, detail, time,
               row_number() OVER (PARTITION BY job_id ORDER BY time, ctid) AS n
          FROM faucets_events WHERE event = 'dispatched') d
 WHERE substring(detail FROM '^to (\S+) ') IS NOT NULL
ON CONFLICT DO NOTHING;
