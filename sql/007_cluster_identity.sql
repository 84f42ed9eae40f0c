-- 007_cluster_identity: the cluster's id, made once with the database (or
-- with this migration, for a database made before it). aqsd tells it to its
-- agents when they register; they keep each cluster's jobs in a spool
-- directory of that cluster's own and report and adopt only those, and job
-- tokens carry it. So a job of another cluster (agents of the same name on
-- one host), or of this cluster's earlier database (re-created over an old
-- spool), is never matched by its number alone. One row; never changed.
CREATE TABLE cluster_identity (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  cluster_id text NOT NULL CHECK (cluster_id ~ '^[0-9a-f]{32}$'),
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO cluster_identity (cluster_id) VALUES (replace(gen_random_uuid()::text, '-', ''));
CREATE FUNCTION aqs_cluster_identity_is_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the cluster id is made once with the database and never changed';
END $$;
CREATE TRIGGER cluster_identity_fixed BEFORE UPDATE OR DELETE ON cluster_identity
  FOR EACH ROW EXECUTE FUNCTION aqs_cluster_identity_is_fixed();
