-- 008_accounting: accounts, users in accounts (Slurm's associations), QOS,
-- what each job was charged, and an audit trail of every change to them.
-- The tree's rules (one root, no cycles, known parents, limits within their
-- bounds) are checked as a whole by aqs::store::account_store before it
-- writes, under a lock on accounts; the constraints below are the last line.
-- The bounds are core/accounts.hpp's k_max_* (a test checks they agree).

-- The limit columns of accounts, account_users and qos (NULL: no limit),
-- copied into each with their checks by LIKE, then dropped.
CREATE TABLE aqs_limits (
  max_jobs          integer CHECK (max_jobs BETWEEN 0 AND 10000000),
  max_submit_jobs   integer CHECK (max_submit_jobs BETWEEN 0 AND 10000000),
  max_wall_s        integer CHECK (max_wall_s BETWEEN 0 AND 31622400),
  grp_cpus          integer CHECK (grp_cpus BETWEEN 0 AND 16777216),
  max_cpus_per_user integer CHECK (max_cpus_per_user BETWEEN 0 AND 16777216)
);

CREATE TABLE accounts (
  name           text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$'),
  -- NULL only for root; an account with sub-accounts or users cannot be deleted.
  parent         text REFERENCES accounts(name) ON DELETE RESTRICT,
  shares         integer NOT NULL DEFAULT 1 CHECK (shares BETWEEN 0 AND 1000000),
  LIKE aqs_limits INCLUDING CONSTRAINTS,
  description    text NOT NULL DEFAULT '',
  organization   text NOT NULL DEFAULT '',
  created_at     timestamptz NOT NULL DEFAULT now(),
  CHECK ((name = 'root') = (parent IS NULL))
);
INSERT INTO accounts (name, parent, description, organization) VALUES ('root', NULL, 'default root account', 'root');

-- A user in an account: the association a job of that user in that account
-- is charged to and limited by.
CREATE TABLE account_users (
  user_name      text NOT NULL CHECK (user_name ~ '^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$'),
  account        text NOT NULL REFERENCES accounts(name) ON DELETE RESTRICT,
  shares         integer NOT NULL DEFAULT 1 CHECK (shares BETWEEN 0 AND 1000000),
  LIKE aqs_limits INCLUDING CONSTRAINTS,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_name, account)
);

-- Each user's default account (the one a job without -A is charged to):
-- always one of the user's own.
CREATE TABLE account_default (
  user_name      text PRIMARY KEY,
  account        text NOT NULL,
  FOREIGN KEY (user_name, account) REFERENCES account_users(user_name, account) ON DELETE CASCADE
);

CREATE TABLE qos (
  name           text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$'),
  priority       integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 1000000),
  LIKE aqs_limits INCLUDING CONSTRAINTS,
  description    text NOT NULL DEFAULT '',
  created_at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO qos (name, description) VALUES ('normal', 'Normal QOS default');
DROP TABLE aqs_limits;

-- What one job was charged, written once when it ends (a second write of
-- the same job is ignored): processor-seconds are the integral of the maps
-- it held, suspended time excluded. Kept when the job's row is purged.
CREATE TABLE usage_records (
  job_id         bigint PRIMARY KEY,
  user_name      text NOT NULL,
  account        text NOT NULL,
  qos            text NOT NULL DEFAULT '',
  start_time     timestamptz NOT NULL,
  end_time       timestamptz NOT NULL CHECK (end_time >= start_time),
  cpu_seconds    double precision NOT NULL CHECK (cpu_seconds >= 0 AND cpu_seconds < 'Infinity'),
  mem_mb_seconds double precision NOT NULL DEFAULT 0 CHECK (mem_mb_seconds >= 0 AND mem_mb_seconds < 'Infinity'),
  gpu_seconds    double precision NOT NULL DEFAULT 0 CHECK (gpu_seconds >= 0 AND gpu_seconds < 'Infinity'),
  recorded_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_records_end ON usage_records (end_time);
CREATE INDEX usage_records_account ON usage_records (account, end_time);

-- Every change to accounts, users and QOS: who, when, what. Append-only.
CREATE TABLE accounting_audit (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at             timestamptz NOT NULL DEFAULT now(),
  actor          text NOT NULL,
  action         text NOT NULL CHECK (action IN ('add', 'modify', 'delete')),
  entity         text NOT NULL CHECK (entity IN ('account', 'user', 'qos')),
  name           text NOT NULL,
  detail         jsonb NOT NULL DEFAULT '{}'
);
-- A trigger that refuses the change with its first argument as the message.
CREATE FUNCTION aqs_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '%', TG_ARGV[0];
END $$;
CREATE TRIGGER accounting_audit_append_only BEFORE UPDATE OR DELETE ON accounting_audit
  FOR EACH ROW EXECUTE FUNCTION aqs_refuse_change('the accounting audit trail is append-only');
