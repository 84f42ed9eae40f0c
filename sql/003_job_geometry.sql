-- A job's geometry beyond its processor count, as Slurm's options give it
-- (tasks, cpus per task, nodes, tasks per node, memory, GPUs, exclusive
-- nodes, partition): the JSON object of the protocol's job "geometry"
-- (docs/protocol.md). NULL: any processors anywhere, what every job stored
-- before this column asked for.
ALTER TABLE jobs ADD COLUMN geometry jsonb CHECK (geometry IS NULL OR jsonb_typeof(geometry) = 'object');
