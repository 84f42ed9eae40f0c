-- 005_job_control: what fctl changes on a live job.
--   control: NULL, or 'held-user' / 'held-admin' (fctl hold: the job stays
--            PENDING out of the queue until released; who held it decides
--            who may release it), or 'resume' (a SUSPENDED job asked to
--            resume and waiting for its processors).
--   Requeue (fctl requeue): RUNNING, RESIZING or SUSPENDED -> PENDING; the
--   same table as aqs::core::is_legal_transition.
ALTER TABLE jobs ADD COLUMN control text;
ALTER TABLE jobs ADD CONSTRAINT jobs_known_control CHECK (control IS NULL OR control IN ('held-user', 'held-admin', 'resume'));
ALTER TABLE jobs ADD CONSTRAINT jobs_held_pending CHECK (control IS NULL OR control = 'resume' OR state = 'PENDING');
ALTER TABLE jobs ADD CONSTRAINT jobs_resume_suspended CHECK (control IS DISTINCT FROM 'resume' OR state = 'SUSPENDED');

CREATE OR REPLACE FUNCTION aqs_check_job_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT (
       (OLD.state = 'PENDING'   AND NEW.state IN ('RUNNING', 'CANCELLED', 'FAILED')) OR
       (OLD.state = 'RUNNING'   AND NEW.state IN ('RESIZING', 'SUSPENDED', 'COMPLETED', 'FAILED',
                                                  'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY', 'PENDING')) OR
       (OLD.state = 'RESIZING'  AND NEW.state IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED',
                                                  'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY', 'PENDING')) OR
       (OLD.state = 'SUSPENDED' AND NEW.state IN ('RUNNING', 'FAILED', 'CANCELLED', 'TIMEOUT',
                                                  'NODE_FAIL', 'OUT_OF_MEMORY', 'PENDING')) OR
       (OLD.state = 'NODE_FAIL' AND NEW.state = 'PENDING')) THEN
    RAISE EXCEPTION 'illegal transition of job %: % -> %', OLD.id, OLD.state, NEW.state
      USING ERRCODE = 'check_violation';
  END IF;
  -- A job leaving the state its control belongs to drops it.
  IF NEW.state IS DISTINCT FROM OLD.state THEN
    NEW.control := NULL;
  END IF;
  RETURN NEW;
END
$$;
