-- 006_resize_claim: a RESIZING job whose shim has begun to apply its new
-- map (resize_begin) is marked control = 'claimed:N' (N the map's epoch) in
-- the same commit that lets it go on. A daemon restarted before the job's
-- acknowledgement then waits for that outcome, holding both maps, instead
-- of guessing which map the job's ranks run on. A state change clears it
-- (aqs_check_job_transition).
ALTER TABLE jobs DROP CONSTRAINT jobs_known_control;
ALTER TABLE jobs ADD CONSTRAINT jobs_known_control
  CHECK (control IS NULL OR control IN ('held-user', 'held-admin', 'resume') OR control ~ '^claimed:[1-9][0-9]*$');
ALTER TABLE jobs DROP CONSTRAINT jobs_held_pending;
ALTER TABLE jobs ADD CONSTRAINT jobs_held_pending
  CHECK (control IS NULL OR control NOT IN ('held-user', 'held-admin') OR state = 'PENDING');
ALTER TABLE jobs ADD CONSTRAINT jobs_claimed_resizing
  CHECK (control IS NULL OR control !~ '^claimed:' OR state = 'RESIZING');
