-- OUT_OF_MEMORY: a job killed by its node agent for using more resident
-- memory than it asked for (--mem, --mem-per-cpu), a final state like
-- TIMEOUT, entered from RUNNING, RESIZING or SUSPENDED. The same table as
-- aqs::core::is_legal_transition.
ALTER TABLE jobs DROP CONSTRAINT jobs_known_state;
ALTER TABLE jobs ADD CONSTRAINT jobs_known_state CHECK (state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED',
  'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY'));
ALTER TABLE jobs DROP CONSTRAINT jobs_end_iff_final;
ALTER TABLE jobs ADD CONSTRAINT jobs_end_iff_final CHECK (
  (state IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')) = (end_time IS NOT NULL));
ALTER TABLE job_events DROP CONSTRAINT job_events_known_states;
ALTER TABLE job_events ADD CONSTRAINT job_events_known_states CHECK (
  (old_state IS NULL OR old_state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED', 'COMPLETED',
                                      'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')) AND
  new_state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED', 'COMPLETED', 'FAILED',
                'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY'));

CREATE OR REPLACE FUNCTION aqs_check_job_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT (
       (OLD.state = 'PENDING'   AND NEW.state IN ('RUNNING', 'CANCELLED', 'FAILED')) OR
       (OLD.state = 'RUNNING'   AND NEW.state IN ('RESIZING', 'SUSPENDED', 'COMPLETED', 'FAILED',
                                                  'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')) OR
       (OLD.state = 'RESIZING'  AND NEW.state IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED',
                                                  'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')) OR
       (OLD.state = 'SUSPENDED' AND NEW.state IN ('RUNNING', 'FAILED', 'CANCELLED', 'TIMEOUT',
                                                  'NODE_FAIL', 'OUT_OF_MEMORY')) OR
       (OLD.state = 'NODE_FAIL' AND NEW.state = 'PENDING')) THEN
    RAISE EXCEPTION 'illegal transition of job %: % -> %', OLD.id, OLD.state, NEW.state
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;
