-- Capacity: paused queues, the task names each worker serves (to spot tasks no worker can run), and the
-- in-flight index that cap checks count through.

CREATE TABLE {{schema}}.horsies_queue_state (
  queue_name varchar(100) PRIMARY KEY,
  paused boolean NOT NULL DEFAULT false,
  paused_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_queue_state_paused_check CHECK (paused = (paused_at IS NOT NULL))
);

ALTER TABLE {{schema}}.horsies_worker_states ADD COLUMN task_names varchar(255)[];

CREATE INDEX horsies_tasks_queue_in_flight_idx
  ON {{schema}}.horsies_tasks (queue_name)
  WHERE status IN ('CLAIMED', 'RUNNING');
