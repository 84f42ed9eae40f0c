-- Advance reservations (issue 32): processors set aside for named users or
-- accounts from a start time, as `scontrol create reservation` makes them.
-- `procs` is the compact per-node form ("node1:0-3,node2:0-1"): processor
-- numbers depend on the order nodes register in, node names and their cores
-- do not. Every change is audited in accounting_audit (entity
-- 'reservation'), append-only like the rest of it.
CREATE TABLE reservations (
  name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
  start_time  timestamptz NOT NULL,
  end_time    timestamptz NOT NULL CHECK (end_time > start_time),
  procs       text NOT NULL CHECK (procs <> ''),
  users       text[] NOT NULL DEFAULT '{}',
  accounts    text[] NOT NULL DEFAULT '{}',
  flags       text[] NOT NULL DEFAULT '{}',
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE accounting_audit DROP CONSTRAINT accounting_audit_entity_check;
ALTER TABLE accounting_audit ADD CONSTRAINT accounting_audit_entity_check
  CHECK (entity IN ('account', 'user', 'qos', 'reservation'));
