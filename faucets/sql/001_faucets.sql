-- faucetsd's own store: the jobs users submitted to the Faucets server, where
-- each was placed, and what happened to it.
CREATE TABLE faucets_jobs (
  id            bigserial PRIMARY KEY,
  owner         text NOT NULL,
  name          text NOT NULL,
  asked_cluster text NOT NULL DEFAULT 'auto',
  submit        text NOT NULL,             -- aqsd's submit message (JSON), forwarded as is
  min_pe        bigint NOT NULL,
  max_pe        bigint NOT NULL,
  adaptive      boolean NOT NULL DEFAULT false,
  walltime_s    double precision NOT NULL DEFAULT 3600,
  state         text NOT NULL DEFAULT 'PENDING',
  cluster       text,                      -- where it is placed now
  local_id      bigint,                    -- its id there
  nprocs        bigint NOT NULL DEFAULT 0,
  exit_code     integer,
  submit_time   timestamptz NOT NULL DEFAULT now(),
  start_time    text,
  end_time      text,
  attempts      integer NOT NULL DEFAULT 0
);
CREATE INDEX faucets_jobs_live ON faucets_jobs (state) WHERE state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL');

CREATE TABLE faucets_events (
  job_id  bigint NOT NULL REFERENCES faucets_jobs (id),
  time    timestamptz NOT NULL DEFAULT now(),
  event   text NOT NULL,
  detail  text NOT NULL DEFAULT ''
);
CREATE INDEX faucets_events_job ON faucets_events (job_id, time);

-- Placements given up when their cluster went away: cancelled there when it
-- comes back, so that nothing runs twice.
CREATE TABLE faucets_abandoned (
  job_id    bigint NOT NULL REFERENCES faucets_jobs (id),
  cluster   text NOT NULL,
  local_id  bigint,
  PRIMARY KEY (job_id, cluster)
);
