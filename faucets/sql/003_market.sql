-- The market (issue 35): the price each placement was agreed at, and the
-- ledger of credits between cluster owners. A contract itself travels in the
-- job's stored submit message ("contract"), which faucetsd keeps and never
-- forwards.

-- The price (credits per processor-second) of a job's placement on a
-- cluster: the cluster's bid when the broker asked for one, else the price
-- it last reported. Kept per cluster: a job placed again elsewhere runs at
-- that cluster's price.
CREATE TABLE faucets_prices (
  job_id   bigint NOT NULL REFERENCES faucets_jobs (id),
  cluster  text NOT NULL,
  price    double precision NOT NULL CHECK (price >= 0),
  time     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, cluster)
);

-- One entry per finished job that ran on a cluster of another owner than
-- its home cluster's: payer (the home's owner) -> payee (the running
-- cluster's owner), in whole micro-credits so that balances sum to exactly
-- zero. A job is charged once (UNIQUE job_id).
CREATE TABLE faucets_ledger (
  id            bigserial PRIMARY KEY,
  job_id        bigint NOT NULL UNIQUE REFERENCES faucets_jobs (id),
  time          timestamptz NOT NULL DEFAULT now(),
  owner         text NOT NULL,            -- the job's user
  payer         text NOT NULL,
  payee         text NOT NULL,
  home_cluster  text NOT NULL,
  cluster       text NOT NULL,
  proc_seconds  double precision NOT NULL CHECK (proc_seconds >= 0),
  price         double precision NOT NULL CHECK (price >= 0),
  amount_micro  bigint NOT NULL CHECK (amount_micro >= 0),
  CHECK (payer <> payee)
);
CREATE INDEX faucets_ledger_payer ON faucets_ledger (payer);
CREATE INDEX faucets_ledger_payee ON faucets_ledger (payee);
