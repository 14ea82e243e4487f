-- Liveness: leader election for maintenance. (The reaper reads CLAIMED and RUNNING rows through the in-flight
-- index of migration 1: there are few of them, and every extra index on a status change costs each transition.)

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
