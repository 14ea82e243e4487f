-- Liveness: leader election for maintenance, and the heartbeat index the reaper reads.

-- One row per elected role (today only 'maintenance'). A leader holds its row while `expires_at` is in the
-- future and renews it; anyone may take an expired row. Works behind PgBouncer (no session state).
CREATE TABLE {{schema}}.horsies_leaders (
  name varchar(100) PRIMARY KEY,
  leader_id varchar(255) NOT NULL,
  elected_at timestamptz NOT NULL DEFAULT now(),
  renewed_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  CONSTRAINT horsies_leaders_expiry_check CHECK (expires_at > elected_at)
);

-- The reaper looks for CLAIMED and RUNNING rows by age.
CREATE INDEX horsies_tasks_claimed_at_idx
  ON {{schema}}.horsies_tasks (claimed_at)
  WHERE status = 'CLAIMED';

CREATE INDEX horsies_tasks_started_at_idx
  ON {{schema}}.horsies_tasks (started_at)
  WHERE status = 'RUNNING';
